// How a program's memory allocator gets its pages: a choice for the program's main(), never
// made by the library (an application embedding the engine keeps its own allocator settings).
// The agentctl CLI makes it first thing; see docs/CAPTURE.md, "Fresh memory" and "Huge pages".
#pragma once

#include <cstddef>

namespace agentctl {

/// Memory that reserve_huge_page_heap() puts at the heap's top at once, on huge pages.
inline constexpr std::size_t huge_page_heap_bytes = std::size_t{64} << 20;

/// With glibc's allocator (elsewhere it does nothing): blocks below 32 MiB (every captured
/// stream, its cap included) come from the heap, and up to 32 MiB freed at its top stays there
/// for the next blocks. First thing in main().
void prepare_process_heap();

/// With glibc's allocator, after prepare_process_heap(): the heap grows now by `bytes`, advised
/// to the kernel for transparent huge pages (madvise(MADV_HUGEPAGE): a 2 MiB page per first
/// touch instead of a 4 KiB one, where the kernel's THP mode is `madvise` or `always`), and is
/// never trimmed below it. Only virtual memory is taken. For a program that touches most of
/// its memory once (the CLI's `check` and `plan`), not for one that keeps many small things
/// alive across it (a run: each 2 MiB page touched is resident whole). Call it once, early.
void reserve_huge_page_heap(std::size_t bytes = huge_page_heap_bytes);

}  // namespace agentctl

// How a program's memory allocator gets its pages: a choice for the program's main(), never
// made by the library (an application embedding the engine keeps its own allocator settings).
// The agentctl CLI makes it first thing; see docs/CAPTURE.md, "Fresh memory" and "Huge pages".
#pragma once

#include <cstddef>

namespace agentctl {

/// Memory that prepare_process_heap() puts at the heap's top at once, on huge pages.
inline constexpr std::size_t huge_page_heap_bytes = std::size_t{64} << 20;

/// With glibc's allocator (elsewhere it does nothing): blocks below 32 MiB (every captured
/// stream, its cap included) come from the heap, and memory freed at its top stays there for the
/// next blocks; the heap grows now by `huge_bytes`, advised to the kernel for transparent huge
/// pages (madvise(MADV_HUGEPAGE): a 2 MiB page per fault instead of a 4 KiB one, where the
/// kernel's THP mode is `madvise` or `always`). Only virtual memory is taken: pages come as
/// they are first written. Call it before the program allocates much, once.
void prepare_process_heap(std::size_t huge_bytes = huge_page_heap_bytes);

}  // namespace agentctl

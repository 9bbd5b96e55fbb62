// The CLI's allocator settings (include/agentctl/process_heap.hpp; docs/CAPTURE.md, "Fresh
// memory" and "Huge pages").
#include <agentctl/process_heap.hpp>

#include <sys/mman.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdint>
#include <cstdlib>

namespace agentctl {

namespace {
// glibc's largest mmap threshold, above a stream's 16 MiB cap.
constexpr std::size_t largest_block = std::size_t{32} << 20;
}  // namespace

void prepare_process_heap() {
#if defined(__GLIBC__)
    // No capture gets a mapping of its own, faulted in page by page and unmapped alone, and
    // what one frees at the top of the heap is the next one's ("Fresh memory").
    ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(largest_block));
    ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(largest_block));
#endif
}

void reserve_huge_page_heap(std::size_t bytes) {
#if defined(__GLIBC__)
    if (bytes == 0) return;
    // Freed memory at the top goes back to the system only past the reserve and a largest
    // block more: the reserve is never given back.
    ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes + largest_block));
    // The next growth of the heap takes the reserve with it: one block larger than what the
    // top has left this early, freed at once (volatile: the compiler may not drop the pair).
    constexpr std::size_t first_block = std::size_t{16} << 20;
    auto* before = static_cast<char*>(::sbrk(0));
    ::mallopt(M_TOP_PAD, static_cast<int>(bytes > first_block ? bytes - first_block : 0));
    static void* volatile block;
    block = std::malloc(first_block);
    std::free(block);
    ::mallopt(M_TOP_PAD, 128 * 1024);  // glibc's default, for any later growth
    auto* after = static_cast<char*>(::sbrk(0));
    auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    auto begin = (reinterpret_cast<std::uintptr_t>(before) + page - 1) & ~(page - 1);
    auto end = reinterpret_cast<std::uintptr_t>(after);
    // The heap did not grow (sbrk failed, glibc mapped the block instead): nothing to advise.
    // EINVAL (a kernel without THP) leaves 4 KiB pages, as without this call.
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
    (void)bytes;
#endif
}

}  // namespace agentctl

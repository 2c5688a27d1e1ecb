/* SPDX-License-Identifier: MIT */
/*
 * cxx.cc - C++'s operators new and delete, tide's (src/malloc.c, src/cxx.c).
 *
 * Every form of new gives a block of tide's (inside tide_ranges(), with its usable size),
 * aligned as asked; new(0) is a block of its own; every form of delete frees into tide (a
 * block of 100 KiB is a large block: the page heap's counters move); a new that cannot be
 * served throws std::bad_alloc and its nothrow form returns nullptr; the new-handler is
 * called until it makes room, and what it throws reaches the caller (the throwing forms) or
 * is caught (nothrow); a sized delete with a size that does not fit aborts with free_sized's
 * report.  Linked with libtide (a C++ program's operator new is then tide's), as a program
 * linked with -ltide is.
 */
#include <criterion/criterion.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <malloc.h>
#include <new>
#include <sys/resource.h>

#include <tide.h>

extern "C" {
#include "child.h"
}

namespace {

constexpr size_t MiB = size_t(1) << 20;

bool in_tide(const void *p, size_t n)
{
    uintptr_t r[64][2];
    size_t nr = tide_ranges(r, 64);
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < nr && i < 64; i++)
        if (a >= r[i][0] && a < r[i][1] && n <= r[i][1] - a)
            return true;
    return false;
}

tide_stats_t stats()
{
    tide_stats_t s;
    memset(&s, 0, sizeof s);
    tide_stats_get(&s, sizeof s);
    return s;
}

/* A block of N bytes from new: tide's, with room for N bytes, written through. */
void expect_tides(void *p, size_t n, const char *form)
{
    cr_assert(p, "%s(%zu) returned nullptr", form, n);
    cr_expect(in_tide(p, n ? n : 1), "%s(%zu) = %p, outside tide's ranges", form, n, p);
    cr_expect(malloc_usable_size(p) >= n, "%s(%zu): usable size %zu", form, n, malloc_usable_size(p));
    memset(p, 0x5a, n);
}

const size_t sizes[] = { 1, 16, 64, 100, 4096, 14336, 20000, 65536, 100000, 3 * MiB };

/* Far beyond what tide maps (64 TiB): no handler can make room for these. */
const size_t huge_sizes[] = { SIZE_MAX, SIZE_MAX - 4096, SIZE_MAX / 2, size_t(1) << 47 };

/* The volatile function pointers keep the compiler from knowing the calls are operator
 * new's and delete's (it may fold a new/delete pair it sees). */
void *(*volatile op_new)(size_t) = &::operator new;
void *(*volatile op_new_array)(size_t) = &::operator new[];
void *(*volatile op_new_nothrow)(size_t, const std::nothrow_t &) noexcept = &::operator new;
void *(*volatile op_new_array_nothrow)(size_t, const std::nothrow_t &) noexcept = &::operator new[];
void *(*volatile op_new_aligned)(size_t, std::align_val_t) = &::operator new;
void *(*volatile op_new_array_aligned)(size_t, std::align_val_t) = &::operator new[];
void *(*volatile op_new_aligned_nothrow)(size_t, std::align_val_t, const std::nothrow_t &) noexcept = &::operator new;
void *(*volatile op_new_array_aligned_nothrow)(size_t, std::align_val_t, const std::nothrow_t &) noexcept =
    &::operator new[];
void (*volatile op_delete)(void *) noexcept = &::operator delete;
void (*volatile op_delete_array)(void *) noexcept = &::operator delete[];
void (*volatile op_delete_sized)(void *, size_t) noexcept = &::operator delete;
void (*volatile op_delete_array_sized)(void *, size_t) noexcept = &::operator delete[];
void (*volatile op_delete_nothrow)(void *, const std::nothrow_t &) noexcept = &::operator delete;
void (*volatile op_delete_array_nothrow)(void *, const std::nothrow_t &) noexcept = &::operator delete[];
void (*volatile op_delete_aligned)(void *, std::align_val_t) noexcept = &::operator delete;
void (*volatile op_delete_array_aligned)(void *, std::align_val_t) noexcept = &::operator delete[];
void (*volatile op_delete_sized_aligned)(void *, size_t, std::align_val_t) noexcept = &::operator delete;
void (*volatile op_delete_array_sized_aligned)(void *, size_t, std::align_val_t) noexcept = &::operator delete[];
void (*volatile op_delete_aligned_nothrow)(void *, std::align_val_t, const std::nothrow_t &) noexcept =
    &::operator delete;
void (*volatile op_delete_array_aligned_nothrow)(void *, std::align_val_t, const std::nothrow_t &) noexcept =
    &::operator delete[];

} // namespace

/* ---- every form's block is tide's ------------------------------------------------------ */

Test(cxx, every_form_of_new_gives_tides_blocks)
{
    const std::align_val_t al{ 64 };
    for (size_t n : sizes) {
        void *p[8] = {
            op_new(n),
            op_new_array(n),
            op_new_nothrow(n, std::nothrow),
            op_new_array_nothrow(n, std::nothrow),
            op_new_aligned(n, al),
            op_new_array_aligned(n, al),
            op_new_aligned_nothrow(n, al, std::nothrow),
            op_new_array_aligned_nothrow(n, al, std::nothrow),
        };
        static const char *const names[8] = { "new", "new[]", "new(nothrow)", "new[](nothrow)", "new(align 64)",
                                              "new[](align 64)", "new(align 64, nothrow)", "new[](align 64, nothrow)" };
        for (int i = 0; i < 8; i++) {
            expect_tides(p[i], n, names[i]);
            for (int j = 0; j < i; j++)
                cr_expect(p[i] != p[j], "%s(%zu) and %s(%zu) gave the same block", names[i], n, names[j], n);
            if (i >= 4)
                cr_expect((uintptr_t)p[i] % 64 == 0, "%s(%zu) = %p", names[i], n, p[i]);
        }
        op_delete_sized(p[0], n);
        op_delete_array_sized(p[1], n);
        op_delete(p[2]);
        op_delete_array(p[3]);
        op_delete_sized_aligned(p[4], n, al);
        op_delete_array_sized_aligned(p[5], n, al);
        op_delete_aligned(p[6], al);
        op_delete_array_aligned(p[7], al);
    }
    cr_expect(tide_check() == 0, "tide_check() found the heap broken");
}

/* Each of the twelve deletes frees into tide: a block of 100 KiB is a large block of the
 * page heap, whose counters tell its allocation and its free. */
Test(cxx, every_form_of_delete_frees_into_tide)
{
    const size_t n = 100000;
    const std::align_val_t al{ 4096 };
    struct form {
        const char *name;
        bool aligned;
        void (*del)(void *p, size_t n, std::align_val_t al);
    };
    static const form forms[] = {
        { "delete", false, [](void *p, size_t, std::align_val_t) { op_delete(p); } },
        { "delete[]", false, [](void *p, size_t, std::align_val_t) { op_delete_array(p); } },
        { "delete(size)", false, [](void *p, size_t n, std::align_val_t) { op_delete_sized(p, n); } },
        { "delete[](size)", false, [](void *p, size_t n, std::align_val_t) { op_delete_array_sized(p, n); } },
        { "delete(nothrow)", false, [](void *p, size_t, std::align_val_t) { op_delete_nothrow(p, std::nothrow); } },
        { "delete[](nothrow)", false,
          [](void *p, size_t, std::align_val_t) { op_delete_array_nothrow(p, std::nothrow); } },
        { "delete(align)", true, [](void *p, size_t, std::align_val_t al) { op_delete_aligned(p, al); } },
        { "delete[](align)", true, [](void *p, size_t, std::align_val_t al) { op_delete_array_aligned(p, al); } },
        { "delete(size, align)", true,
          [](void *p, size_t n, std::align_val_t al) { op_delete_sized_aligned(p, n, al); } },
        { "delete[](size, align)", true,
          [](void *p, size_t n, std::align_val_t al) { op_delete_array_sized_aligned(p, n, al); } },
        { "delete(align, nothrow)", true,
          [](void *p, size_t, std::align_val_t al) { op_delete_aligned_nothrow(p, al, std::nothrow); } },
        { "delete[](align, nothrow)", true,
          [](void *p, size_t, std::align_val_t al) { op_delete_array_aligned_nothrow(p, al, std::nothrow); } },
    };
    for (const form &f : forms) {
        tide_stats_t before = stats();
        void *p = f.aligned ? op_new_aligned(n, al) : op_new(n);
        expect_tides(p, n, f.aligned ? "new(align 4096)" : "new");
        tide_stats_t held = stats();
        f.del(p, n, al);
        tide_stats_t after = stats();
        cr_expect(held.nmalloc_large == before.nmalloc_large + 1, "%s: new(%zu) took %llu large blocks, want 1",
                  f.name, n, (unsigned long long)(held.nmalloc_large - before.nmalloc_large));
        cr_expect(after.nfree_large == held.nfree_large + 1, "%s freed %llu large blocks, want 1", f.name,
                  (unsigned long long)(after.nfree_large - held.nfree_large));
    }
    /* nullptr: nothing, as free(NULL). */
    for (const form &f : forms)
        f.del(nullptr, 0, al);
}

Test(cxx, aligned_new_is_aligned)
{
    static const size_t aligns[] = { 1, 2, 8, 16, 32, 64, 256, 4096, 65536, 2 * MiB };
    for (size_t a : aligns)
        for (size_t n : { size_t(0), size_t(1), size_t(64), size_t(5000), size_t(100000) }) {
            std::align_val_t al{ a };
            void *p = op_new_aligned(n, al), *q = op_new_array_aligned_nothrow(n, al, std::nothrow);
            expect_tides(p, n, "new(align)");
            expect_tides(q, n, "new[](align, nothrow)");
            cr_expect((uintptr_t)p % a == 0 && (uintptr_t)q % a == 0, "new(%zu, align %zu) = %p, %p", n, a, p, q);
            op_delete_sized_aligned(p, n, al);
            op_delete_array_aligned(q, al);
        }
}

Test(cxx, new_of_zero_bytes_is_a_block_of_its_own)
{
    void *p[6] = { op_new(0), op_new(0), op_new_array(0), op_new_nothrow(0, std::nothrow),
                   op_new_aligned(0, std::align_val_t{ 4096 }), op_new_aligned(0, std::align_val_t{ 4096 }) };
    for (int i = 0; i < 6; i++) {
        cr_assert(p[i], "new(0) returned nullptr");
        cr_expect(in_tide(p[i], 1), "new(0) = %p, outside tide's ranges", p[i]);
        for (int j = 0; j < i; j++)
            cr_expect(p[i] != p[j], "new(0) gave %p twice", p[i]);
    }
    op_delete_sized(p[0], 0);
    op_delete(p[1]);
    op_delete_array_sized(p[2], 0);
    op_delete(p[3]);
    op_delete_sized_aligned(p[4], 0, std::align_val_t{ 4096 });
    op_delete_aligned(p[5], std::align_val_t{ 4096 });
}

/* ---- failure: std::bad_alloc, nullptr ---------------------------------------------------- */

Test(cxx, a_new_that_cannot_be_served_throws_bad_alloc)
{
    cr_assert(std::get_new_handler() == nullptr);
    for (size_t n : huge_sizes) {
        int thrown = 0;
        try {
            op_new(n);
        } catch (const std::bad_alloc &) {
            thrown |= 1;
        }
        try {
            op_new_array(n);
        } catch (const std::bad_alloc &) {
            thrown |= 2;
        }
        try {
            op_new_aligned(n, std::align_val_t{ 4096 });
        } catch (const std::bad_alloc &) {
            thrown |= 4;
        }
        try {
            op_new_array_aligned(n, std::align_val_t{ 32 });
        } catch (const std::bad_alloc &) {
            thrown |= 8;
        }
        cr_expect(thrown == 15, "new(%zu): std::bad_alloc thrown by the forms %#x of 0xf", n, (unsigned)thrown);
    }
    /* An alignment that is no power of two fails too (as libstdc++'s new). */
    bool thrown = false;
    try {
        op_new_aligned(64, std::align_val_t{ 48 });
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    cr_expect(thrown, "new(64, align 48) did not throw std::bad_alloc");
    cr_expect(std::uncaught_exceptions() == 0);
}

Test(cxx, the_nothrow_forms_return_nullptr)
{
    for (size_t n : huge_sizes) {
        cr_expect(op_new_nothrow(n, std::nothrow) == nullptr, "new(%zu, nothrow)", n);
        cr_expect(op_new_array_nothrow(n, std::nothrow) == nullptr, "new[](%zu, nothrow)", n);
        cr_expect(op_new_aligned_nothrow(n, std::align_val_t{ 64 }, std::nothrow) == nullptr, "new(%zu, align, nothrow)",
                  n);
        cr_expect(op_new_array_aligned_nothrow(n, std::align_val_t{ 2 * MiB }, std::nothrow) == nullptr,
                  "new[](%zu, align, nothrow)", n);
    }
    cr_expect(op_new_aligned_nothrow(64, std::align_val_t{ 0 }, std::nothrow) == nullptr, "new(64, align 0, nothrow)");
    cr_expect(op_new_aligned_nothrow(64, std::align_val_t{ 3 }, std::nothrow) == nullptr, "new(64, align 3, nothrow)");
}

/* ---- the new-handler ---------------------------------------------------------------------- */

namespace {
int handler_calls;

/* Returns twice without making room, then removes itself. */
void handler_gives_up()
{
    if (++handler_calls == 3)
        std::set_new_handler(nullptr);
}

struct handler_error {
    int code;
};
void handler_throws() { throw handler_error{ ++handler_calls }; }
void handler_throws_bad_alloc()
{
    ++handler_calls;
    throw std::bad_alloc();
}
} // namespace

Test(cxx, the_new_handler_is_called_until_it_gives_up)
{
    handler_calls = 0;
    std::set_new_handler(handler_gives_up);
    bool thrown = false;
    try {
        op_new(SIZE_MAX / 2);
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    cr_expect(thrown && handler_calls == 3, "new: thrown %d after %d calls of the handler, want 3", thrown,
              handler_calls);
    handler_calls = 0;
    std::set_new_handler(handler_gives_up);
    cr_expect(op_new_aligned_nothrow(SIZE_MAX / 2, std::align_val_t{ 64 }, std::nothrow) == nullptr);
    cr_expect(handler_calls == 3, "new(align, nothrow): %d calls of the handler, want 3", handler_calls);
}

Test(cxx, what_the_new_handler_throws_reaches_the_caller)
{
    std::set_new_handler(handler_throws);
    for (int form = 0; form < 4; form++) {
        handler_calls = 0;
        int code = 0;
        try {
            switch (form) {
            case 0: op_new(SIZE_MAX / 2); break;
            case 1: op_new_array(SIZE_MAX / 2); break;
            case 2: op_new_aligned(SIZE_MAX / 2, std::align_val_t{ 4096 }); break;
            default: op_new_array_aligned(SIZE_MAX / 2, std::align_val_t{ 64 }); break;
            }
        } catch (const handler_error &e) {
            code = e.code;
        }
        cr_expect(code == 1 && handler_calls == 1, "form %d: caught %d after %d calls", form, code, handler_calls);
    }
    std::set_new_handler(handler_throws_bad_alloc);
    handler_calls = 0;
    bool thrown = false;
    try {
        op_new(SIZE_MAX / 2);
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    cr_expect(thrown && handler_calls == 1);
    std::set_new_handler(nullptr);
    cr_expect(std::uncaught_exceptions() == 0);
}

/* The nothrow forms: nullptr, the exception caught and gone (none pending, and the next
 * throw and catch work), whether or not another exception is being handled meanwhile. */
Test(cxx, the_nothrow_forms_catch_what_the_new_handler_throws)
{
    for (int h = 0; h < 2; h++) {
        std::set_new_handler(h ? handler_throws_bad_alloc : handler_throws);
        handler_calls = 0;
        cr_expect(op_new_nothrow(SIZE_MAX / 2, std::nothrow) == nullptr);
        cr_expect(op_new_array_nothrow(SIZE_MAX / 2, std::nothrow) == nullptr);
        cr_expect(op_new_aligned_nothrow(SIZE_MAX / 2, std::align_val_t{ 64 }, std::nothrow) == nullptr);
        cr_expect(op_new_array_aligned_nothrow(SIZE_MAX / 2, std::align_val_t{ 64 }, std::nothrow) == nullptr);
        cr_expect(handler_calls == 4, "handler %d: %d calls, want 4 (one a form)", h, handler_calls);
        cr_expect(std::uncaught_exceptions() == 0 && !std::current_exception());
        try {
            throw handler_error{ 77 };
        } catch (const handler_error &outer) {
            /* Inside a handler: the outer exception stays the current one. */
            cr_expect(op_new_nothrow(SIZE_MAX / 2, std::nothrow) == nullptr);
            cr_expect(std::current_exception() != nullptr && outer.code == 77);
            try {
                throw;
            } catch (const handler_error &again) {
                cr_expect(again.code == 77, "the exception being handled is now %d", again.code);
            }
        }
    }
    std::set_new_handler(nullptr);
    cr_expect(std::uncaught_exceptions() == 0 && !std::current_exception());
}

/* A handler that frees a reserve makes room: run in a child whose address space is
 * limited (RLIMIT_AS) to what it has mapped and a little more, so that tide cannot grow
 * its range: the reserve's pages are the only room for the request. */
namespace {
void *reserve;

void free_the_reserve()
{
    ++handler_calls;
    free(reserve);
    reserve = nullptr;
    std::set_new_handler(nullptr);
}

long vm_size_kib()
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0)
            kib = strtol(line + 7, nullptr, 10);
    if (f)
        fclose(f);
    return kib;
}

int handler_makes_room(void *arg)
{
    bool nothrow = arg != nullptr;
    const size_t reserve_size = 96 * MiB, want = 80 * MiB;
    reserve = malloc(reserve_size);
    TT_CHILD_CHECK(reserve, "malloc(%zu) failed", reserve_size);
    long kib = vm_size_kib();
    TT_CHILD_CHECK(kib > 0, "no VmSize in /proc/self/status");
    struct rlimit rl = { rlim_t(kib) * 1024 + 8 * MiB, RLIM_INFINITY };
    TT_CHILD_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
    /* Without the handler, the request fails: the range cannot grow. */
    void *p = malloc(want);
    TT_CHILD_CHECK(p == nullptr, "malloc(%zu) succeeded in spite of RLIMIT_AS", want);
    handler_calls = 0;
    std::set_new_handler(free_the_reserve);
    p = nothrow ? op_new_nothrow(want, std::nothrow) : op_new(want);
    TT_CHILD_CHECK(p != nullptr && handler_calls == 1, "new(%zu) = %p after %d calls of the handler", want, p,
                   handler_calls);
    TT_CHILD_CHECK(in_tide(p, want), "new(%zu) = %p, outside tide's ranges", want, p);
    memset(p, 1, want);
    op_delete_sized(p, want);
    return 0;
}
} // namespace

Test(cxx, a_new_handler_that_frees_a_reserve_makes_room, .timeout = 60)
{
    for (int nothrow = 0; nothrow < 2; nothrow++) {
        tt_child_spec spec = {};
        spec.fn = handler_makes_room;
        spec.arg = nothrow ? (void *)1 : nullptr;
        spec.timeout_s = 50;
        tt_child c;
        cr_assert(tt_child_run(&spec, &c) == 0, "fork: %s", strerror(errno));
        char how[128];
        cr_expect(tt_child_exited(&c, 0), "%s: the child %s:\n%s", nothrow ? "nothrow" : "new",
                  tt_child_how(&c, how, sizeof how), c.err);
        tt_child_free(&c);
    }
}

/* ---- sized delete with a size that does not fit ---------------------------------------------- */

namespace {
int wrong_size(void *arg)
{
    int which = (int)(intptr_t)arg;
    void *p = which < 2 ? op_new(64) : op_new_aligned(64, std::align_val_t{ 256 });
    switch (which) {
    case 0: op_delete_sized(p, 4096); break;
    case 1: op_delete_array_sized(p, 1000000); break;
    case 2: op_delete_sized_aligned(p, 4096, std::align_val_t{ 256 }); break;
    default: op_delete_array_sized_aligned(p, 100000, std::align_val_t{ 256 }); break;
    }
    fprintf(stderr, "<not caught>\n");
    return 0;
}
} // namespace

Test(cxx, sized_delete_with_a_wrong_size_aborts_with_free_sizeds_report)
{
    static const char *const want[] = { "tide: free_sized(): size does not match the allocation of 0x",
                                        "tide: free_sized(): size does not match the allocation of 0x",
                                        "tide: free_aligned_sized(): size does not match the allocation of 0x",
                                        "tide: free_aligned_sized(): size does not match the allocation of 0x" };
    for (int which = 0; which < 4; which++) {
        tt_child_spec spec = {};
        spec.fn = wrong_size;
        spec.arg = (void *)(intptr_t)which;
        spec.timeout_s = 30;
        tt_child c;
        cr_assert(tt_child_run(&spec, &c) == 0, "fork: %s", strerror(errno));
        char how[128];
        const char *nl = strchr(c.err, '\n');
        cr_expect(tt_child_signalled(&c, SIGABRT) && strncmp(c.err, want[which], strlen(want[which])) == 0 && nl &&
                      !nl[1],
                  "case %d: the child %s, stderr:\n%s\nwant one line starting %s", which,
                  tt_child_how(&c, how, sizeof how), c.err, want[which]);
        tt_child_free(&c);
    }
}

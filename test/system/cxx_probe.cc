/* SPDX-License-Identifier: MIT */
/*
 * cxx_probe.cc - an ordinary C++ program, linked with libstdc++ and not with tide, that
 * test/system/preload runs with LD_PRELOAD=libtide.so: its operators new and delete must
 * be tide's.  It finds tide, if loaded, through dlsym, as any program could.
 *
 *   cxx_probe ops          for each of the twenty operators, the object the dynamic linker
 *                          binds its name to ("bind NAME OBJECT"); then what new and delete
 *                          expressions did in tide: "blocks IN/ALL in tide" (new's blocks
 *                          inside tide_ranges()), "large +A -F" (a new char[100000] and its
 *                          delete[], in tide_stats_get's large-block counters)
 *   cxx_probe wrong_size   a sized delete with a size that does not fit: tide aborts
 *   cxx_probe bad_alloc    new of 2^63 bytes: "bad_alloc"; its nothrow form: "nullptr"
 */
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <tide.h> /* (for tide_stats_t only: the functions come through dlsym) */

namespace {

const char *const names[] = {
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

size_t (*ranges)(uintptr_t (*)[2], size_t);
int (*stats_get)(tide_stats_t *, size_t);

bool in_tide(const void *p)
{
    uintptr_t r[64][2];
    size_t n = ranges ? ranges(r, 64) : 0;
    for (size_t i = 0; i < n && i < 64; i++)
        if ((uintptr_t)p >= r[i][0] && (uintptr_t)p < r[i][1])
            return true;
    return false;
}

struct alignas(64) line {
    char bytes[64];
};

struct node {
    std::string name;
    std::vector<int> values;
    std::unique_ptr<node> next;
};

int run_ops()
{
    for (const char *name : names) {
        void *f = dlsym(RTLD_DEFAULT, name);
        Dl_info info;
        const char *obj = f && dladdr(f, &info) && info.dli_fname ? info.dli_fname : "(none)";
        printf("bind %s %s\n", name, obj);
    }
    ranges = (size_t(*)(uintptr_t(*)[2], size_t))dlsym(RTLD_DEFAULT, "tide_ranges");
    stats_get = (int (*)(tide_stats_t *, size_t))dlsym(RTLD_DEFAULT, "tide_stats_get");

    /* new and delete as a program writes them: objects, arrays, containers, aligned types. */
    std::vector<const void *> blocks;
    std::unique_ptr<node> list;
    for (int i = 0; i < 100; i++) {
        auto n = std::make_unique<node>();
        n->name = std::string(40 + i, 'x');
        n->values.assign(i * 10 + 1, i);
        n->next = std::move(list);
        list = std::move(n);
        blocks.push_back(list.get());
        blocks.push_back(list->name.data());
        blocks.push_back(list->values.data());
    }
    line *lines = new line[7];
    int *ints = new (std::nothrow) int[1000];
    blocks.push_back(lines);
    blocks.push_back(ints);
    size_t in = 0;
    for (const void *p : blocks)
        in += in_tide(p);
    printf("blocks %zu/%zu in tide\n", in, blocks.size());
    printf("aligned %s\n", (uintptr_t)lines % 64 == 0 ? "yes" : "no");
    delete[] lines;
    delete[] ints;
    while (list)
        list = std::move(list->next);

    tide_stats_t a, b, c;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b), memset(&c, 0, sizeof c);
    if (stats_get)
        stats_get(&a, sizeof a);
    char *big = new char[100000];
    big[0] = big[99999] = 1;
    if (stats_get)
        stats_get(&b, sizeof b);
    delete[] big;
    if (stats_get)
        stats_get(&c, sizeof c);
    printf("large +%llu -%llu\n", (unsigned long long)(b.nmalloc_large - a.nmalloc_large),
           (unsigned long long)(c.nfree_large - b.nfree_large));
    return 0;
}

void *(*volatile op_new)(size_t) = &::operator new;
void *(*volatile op_new_nothrow)(size_t, const std::nothrow_t &) noexcept = &::operator new;
void (*volatile op_delete_sized)(void *, size_t) noexcept = &::operator delete;

} // namespace

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "ops") == 0)
        return run_ops();
    if (strcmp(mode, "wrong_size") == 0) {
        op_delete_sized(op_new(64), 4096);
        fprintf(stderr, "<not caught>\n");
        return 0;
    }
    if (strcmp(mode, "bad_alloc") == 0) {
        try {
            op_new(size_t(1) << 63);
            puts("no exception");
        } catch (const std::bad_alloc &) {
            puts("bad_alloc");
        }
        puts(op_new_nothrow(size_t(1) << 63, std::nothrow) ? "a block" : "nullptr");
        return 0;
    }
    fprintf(stderr, "usage: cxx_probe ops|wrong_size|bad_alloc\n");
    return 2;
}

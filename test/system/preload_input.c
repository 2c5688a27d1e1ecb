/* SPDX-License-Identifier: MIT */
/*
 * preload_input.c - the C file test/system/preload compiles with gcc, with and without libtide
 * preloaded into the compiler: the object files, the assembly and the program's output
 * must be the same.  Plain C99, no libraries beyond libc.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char *key;
    unsigned long count;
    struct entry *next;
};

struct table {
    struct entry **slots;
    size_t nslots, n;
};

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static void grow(struct table *t)
{
    size_t ns = t->nslots ? t->nslots * 2 : 64;
    struct entry **slots = calloc(ns, sizeof *slots);
    for (size_t i = 0; i < t->nslots; i++)
        for (struct entry *e = t->slots[i], *next; e; e = next) {
            next = e->next;
            size_t j = hash(e->key) & (ns - 1);
            e->next = slots[j];
            slots[j] = e;
        }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
}

static void add(struct table *t, const char *key)
{
    if (t->n * 4 >= t->nslots * 3)
        grow(t);
    size_t j = hash(key) & (t->nslots - 1);
    for (struct entry *e = t->slots[j]; e; e = e->next)
        if (strcmp(e->key, key) == 0) {
            e->count++;
            return;
        }
    struct entry *e = malloc(sizeof *e);
    e->key = strdup(key);
    e->count = 1;
    e->next = t->slots[j];
    t->slots[j] = e;
    t->n++;
}

static int by_count(const void *a, const void *b)
{
    const struct entry *x = *(const struct entry *const *)a, *y = *(const struct entry *const *)b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->key, y->key);
}

static uint32_t rng_state = 2463534242u;
static uint32_t xorshift(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static double integrate(double (*f)(double), double a, double b, int n)
{
    double h = (b - a) / n, s = (f(a) + f(b)) / 2;
    for (int i = 1; i < n; i++)
        s += f(a + i * h);
    return s * h;
}

static double poly(double x) { return x * x * x - 2 * x + 1; }

int main(void)
{
    static const char *const syll[] = {"ka", "lo", "mi", "nu", "pe", "ra", "si", "to"};
    struct table t = {0};
    char word[32];
    for (int i = 0; i < 200000; i++) {
        int len = 1 + (int)(xorshift() % 4);
        word[0] = 0;
        for (int k = 0; k < len; k++)
            strcat(word, syll[xorshift() % 8]);
        add(&t, word);
    }
    struct entry **all = malloc(t.n * sizeof *all);
    size_t k = 0;
    for (size_t i = 0; i < t.nslots; i++)
        for (struct entry *e = t.slots[i]; e; e = e->next)
            all[k++] = e;
    qsort(all, k, sizeof *all, by_count);
    printf("%zu distinct words\n", k);
    for (size_t i = 0; i < 10 && i < k; i++)
        printf("%-10s %lu\n", all[i]->key, all[i]->count);
    printf("integral %.9f\n", integrate(poly, 0.0, 2.0, 1000000));
    for (size_t i = 0; i < k; i++) {
        free(all[i]->key);
        free(all[i]);
    }
    free(all);
    free(t.slots);
    return 0;
}

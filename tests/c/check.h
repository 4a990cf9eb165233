/*
 * check.h -- the little that the C unit tests need: CHECK(cond) counts a
 * failure and says where, a reproducible pseudo-random generator for the
 * randomized cases, and the count of the process's mappings.  tests/test_c_units.py builds and runs the tests
 * (under valgrind memcheck when it is installed).
 */
#ifndef PYGPU_TEST_CHECK_H
#define PYGPU_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int check_failures, check_count;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        check_count++;                                                                 \
        if (!(cond)) {                                                                 \
            check_failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);   \
        }                                                                              \
    } while (0)

/* Report and return the exit status: 0 if every check passed. */
static int check_done(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

/* xorshift64*: the same sequence on every machine. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static inline uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}

/* A number in [lo, hi]. */
static inline long long rng_range(long long lo, long long hi)
{
    return lo + (long long)(rng_next() % (uint64_t)(hi - lo + 1));
}

/* How many mappings the process has (lines of /proc/self/maps), -1 where
 * it cannot tell: a test that made and unmade blocks finds as many as
 * before. */
static inline int mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0, c;
    if (!f)
        return -1;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

#endif /* PYGPU_TEST_CHECK_H */

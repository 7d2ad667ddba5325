/* rng.c — the seeded random generator and parameter initialization.
 *
 * xoshiro256** (Blackman and Vigna), seeded through splitmix64 so that any
 * 64-bit seed, 0 included, gives a well-mixed state.  Everything random in
 * a dlc program (initial weights, shuffling, dropout masks) draws from a
 * DlrtRng the caller owns, so a seed and a thread count determine a run. */
#include <math.h>

#include "dlrt.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void dlrt_rng_seed(DlrtRng *rng, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dlrt_rng_next(DlrtRng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float dlrt_rng_uniform(DlrtRng *rng) {
    return (float)(dlrt_rng_next(rng) >> 40) * (1.0f / 16777216.0f);
}

uint64_t dlrt_rng_below(DlrtRng *rng, uint64_t n) {
    /* reject the top partial range so every value is equally likely */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = dlrt_rng_next(rng);
    while (x >= limit);
    return x % n;
}

void dlrt_init_kaiming_uniform(float *w, int64_t n, int64_t fan_in, DlrtRng *rng) {
    float bound = fan_in > 0 ? (float)(1.0 / sqrt((double)fan_in)) : 0.0f;
    for (int64_t i = 0; i < n; i++)
        w[i] = (2.0f * dlrt_rng_uniform(rng) - 1.0f) * bound;
}

void dlrt_init_constant(float *w, int64_t n, float value) {
    for (int64_t i = 0; i < n; i++)
        w[i] = value;
}

/* The f64 twins draw the same floats, so that a network created in f64 from
 * a seed holds exactly the f32 network's weights from that seed. */
void dlrt_init_kaiming_uniform_f64(double *w, int64_t n, int64_t fan_in, DlrtRng *rng) {
    float bound = fan_in > 0 ? (float)(1.0 / sqrt((double)fan_in)) : 0.0f;
    for (int64_t i = 0; i < n; i++)
        w[i] = (double)((2.0f * dlrt_rng_uniform(rng) - 1.0f) * bound);
}

/* Box-Muller: two uniform numbers (the first moved off 0) give a normal
 * one; in float arithmetic, so that the f64 twin gets the same values */
static float normal(DlrtRng *rng) {
    float u = 1.0f - dlrt_rng_uniform(rng), v = dlrt_rng_uniform(rng);
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853071795864769f * v);
}

void dlrt_init_normal(float *w, int64_t n, DlrtRng *rng) {
    for (int64_t i = 0; i < n; i++)
        w[i] = normal(rng);
}

void dlrt_init_normal_f64(double *w, int64_t n, DlrtRng *rng) {
    for (int64_t i = 0; i < n; i++)
        w[i] = (double)normal(rng);
}

void dlrt_init_constant_f64(double *w, int64_t n, double value) {
    for (int64_t i = 0; i < n; i++)
        w[i] = value;
}

/* splitmix64's finalizer, applied to the seed and each counter in turn. */
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t dlrt_rng_derive(uint64_t seed, uint64_t a, uint64_t b) {
    return mix(mix(mix(seed) + 0x9e3779b97f4a7c15ull + a) + 0x9e3779b97f4a7c15ull + b);
}

float dlrt_rng_uniform_at(uint64_t seed, uint64_t i) {
    /* splitmix64's state after i + 1 steps from seed, mixed: any element of
       the stream without the ones before it */
    uint64_t z = mix(seed + (i + 1) * 0x9e3779b97f4a7c15ull);
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

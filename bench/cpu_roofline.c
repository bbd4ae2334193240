/* The two ceilings a CPU kernel's GFLOP/s is read against: the FMA peak of the vector ISA
 * this file is compiled for (AVX-512 with -march=native on an AVX-512 machine, AVX2 with
 * -march=haswell) and the DRAM read bandwidth, both on every OpenMP thread.
 *
 *   cc -O3 -march=native -fopenmp bench/cpu_roofline.c -o /tmp/roofline && /tmp/roofline
 *   cc -O3 -march=haswell -fopenmp bench/cpu_roofline.c -o /tmp/roofline2 && /tmp/roofline2
 *
 * The FMA loop keeps 12 independent accumulators per thread (more than the FMA latency
 * times the FMA ports of current cores), so it measures throughput, not latency. Best of
 * five repetitions each. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define ISA "AVX-512"
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define LOAD _mm512_load_ps
#define ADD _mm512_add_ps
#define SUM(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define ISA "AVX2"
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define LOAD _mm256_load_ps
#define ADD _mm256_add_ps
#define SUM(v) ((v)[0] + (v)[1] + (v)[2] + (v)[3] + (v)[4] + (v)[5] + (v)[6] + (v)[7])
#else
#error "compile with -march for an AVX2 (FMA) or AVX-512 machine"
#endif

#define ACC 12

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double fma_peak(long steps) {
    double best = 0.0;
    float sink = 0.0f;
    for (int rep = 0; rep < 5; rep++) {
        double start = now();
#pragma omp parallel reduction(+ : sink)
        {
            vec acc[ACC];
            vec b = SET1(1.0000001f), c = SET1(0.999999f);
            for (int i = 0; i < ACC; i++) acc[i] = SET1((float)i);
            for (long s = 0; s < steps; s++)
                for (int i = 0; i < ACC; i++) acc[i] = FMA(acc[i], b, c);
            for (int i = 0; i < ACC; i++) sink += SUM(acc[i]);
        }
        double gflops = 2.0 * LANES * ACC * steps * omp_get_max_threads() / (now() - start) / 1e9;
        if (gflops > best) best = gflops;
    }
    if (sink == 1234.5f) printf(" ");  /* keeps the loop */
    return best;
}

static double read_bandwidth(long floats) {
    float *a = aligned_alloc(64, floats * sizeof(float));
    if (!a) return 0.0;
#pragma omp parallel for
    for (long i = 0; i < floats; i++) a[i] = (float)(i & 1023);
    double best = 0.0;
    float sink = 0.0f;
    for (int rep = 0; rep < 5; rep++) {
        double start = now();
#pragma omp parallel reduction(+ : sink)
        {
            vec s = SET1(0.0f);
#pragma omp for
            for (long i = 0; i < floats; i += LANES) s = ADD(s, LOAD(a + i));
            sink += SUM(s);
        }
        double gbs = floats * sizeof(float) / (now() - start) / 1e9;
        if (gbs > best) best = gbs;
    }
    if (sink == 1234.5f) printf(" ");
    free(a);
    return best;
}

int main(void) {
    int threads = omp_get_max_threads();
    double peak = fma_peak(20000000L);
    printf("%s FMA peak: %.1f GFLOP/s on %d threads (%.1f per thread)\n", ISA, peak, threads, peak / threads);
    printf("DRAM read: %.1f GB/s on %d threads (256 MiB array)\n", read_bandwidth(64L * 1024 * 1024), threads);
    return 0;
}

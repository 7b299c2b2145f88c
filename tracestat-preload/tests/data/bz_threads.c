/* bzip2's library in four threads: thread k compresses the file argv[k] (block size k
 * hundred kB) and decompresses it again, each on its own data, so that every count is fixed
 * by the inputs alone whatever the scheduling. Prints each thread's packed size and whether
 * its round trip gave the input back. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bzlib.h"

struct job {
    const char *path;
    int level;
    unsigned packed;
    int same;
};

static void *work(void *arg) {
    struct job *job = arg;
    FILE *f = fopen(job->path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *in = malloc(n), *back = malloc(n);
    unsigned cap = n + n / 100 + 600, len = n;
    char *out = malloc(cap);
    if (fread(in, 1, n, f) != (size_t)n) return NULL;
    fclose(f);
    job->packed = cap;
    if (BZ2_bzBuffToBuffCompress(out, &job->packed, in, n, job->level, 0, 30) != BZ_OK) return NULL;
    if (BZ2_bzBuffToBuffDecompress(back, &len, out, job->packed, 0, 0) != BZ_OK) return NULL;
    job->same = len == (unsigned)n && !memcmp(in, back, n);
    free(in);
    free(back);
    free(out);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    pthread_t t[4];
    struct job jobs[4];
    for (int k = 0; k < 4; k++) {
        jobs[k] = (struct job){argv[k + 1], k + 1, 0, 0};
        pthread_create(&t[k], NULL, work, &jobs[k]);
    }
    for (int k = 0; k < 4; k++) pthread_join(t[k], NULL);
    for (int k = 0; k < 4; k++) printf("%u %d\n", jobs[k].packed, jobs[k].same);
    return 0;
}

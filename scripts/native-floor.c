/* The floor of a timed `-finstrument-functions` call on this host, for scripts/bench-native.sh:
 * the least a hook can do and still keep the function profiler's record of every call.
 *
 * Built as a preloadable library. Per thread: a shadow stack of (function, TSC at entry,
 * traced children's time) and an open-addressing table of cells, one per function, each
 * holding what tracestat's timed cell holds: hits, the 128-bit sum, min, max, the 192-bit
 * sum of squares and log2 buckets with 2 sub-buckets per power of two (counted one sample
 * late, as tracestat does). Durations stay in TSC ticks (no conversion to nanoseconds).
 *
 * Left out, on purpose: sites, filters and several users at once, the read-side sections that
 * make unregistering safe, reentrancy (signal handlers), longjmp and exception safety, thread
 * teardown, more than 1024 functions a thread, and any output. What tracestat costs over this
 * is what those take.
 */
#include <stdint.h>
#include <stdlib.h>
#include <x86intrin.h>

#define DEPTH 4096
#define CELLS 1024 /* a power of two */

struct frame { uintptr_t func; uint64_t start, children; };
struct cell {
  uintptr_t func;
  uint64_t hits, sum_lo, sum_hi, min_not, max, sq0, sq1, sq2, deferred;
  uint64_t buckets[256];
};
struct thread { unsigned top; struct frame stack[DEPTH]; struct cell cells[CELLS]; };

static __thread struct thread *self;

#define HOOK __attribute__((no_instrument_function))

/* The function's cell; null (the call goes unrecorded) once the table is full. */
HOOK static struct cell *cell_of(struct thread *t, uintptr_t func) {
  unsigned i = (func >> 4) & (CELLS - 1);
  for (unsigned n = 0; n < CELLS; n++, i = (i + 1) & (CELLS - 1)) {
    struct cell *c = &t->cells[i];
    if (c->func == func) return c;
    if (c->func == 0) { c->func = func; return c; }
  }
  return 0;
}

HOOK static void record(struct cell *c, uint64_t x) {
  unsigned __int128 s = ((unsigned __int128)c->sum_hi << 64 | c->sum_lo) + x;
  c->sum_lo = (uint64_t)s;
  c->sum_hi = (uint64_t)(s >> 64);
  if (~x > c->min_not) c->min_not = ~x;
  if (x > c->max) c->max = x;
  unsigned __int128 q = (unsigned __int128)x * x;
  unsigned __int128 a = ((unsigned __int128)c->sq1 << 64 | c->sq0) + q;
  if (a < q) c->sq2++;
  c->sq0 = (uint64_t)a;
  c->sq1 = (uint64_t)(a >> 64);
  /* The bucket of the previous sample, then this one's named for the next. */
  c->buckets[(uint8_t)c->deferred]++;
  if (x != 0 && x < (1ull << 62)) {
    unsigned e = 63 - __builtin_clzll(x);
    c->deferred = 1 + (e << 2) + ((x << 2) >> e) - 4 + 1;
  } else {
    c->deferred = 0;
  }
  c->hits++;
}

HOOK void __cyg_profile_func_enter(void *func, void *site) {
  (void)site;
  struct thread *t = self;
  if (__builtin_expect(t == 0, 0)) {
    t = self = calloc(1, sizeof *t);
    if (t == 0) abort();
  }
  unsigned i = t->top++;
  if (i < DEPTH) {
    t->stack[i].func = (uintptr_t)func;
    t->stack[i].children = 0;
    t->stack[i].start = __rdtsc();
  }
}

HOOK void __cyg_profile_func_exit(void *func, void *site) {
  (void)func, (void)site;
  uint64_t now = __rdtsc();
  struct thread *t = self;
  if (t == 0 || t->top == 0) return;
  unsigned i = --t->top;
  if (i >= DEPTH) return;
  uint64_t x = now - t->stack[i].start;
  if (i > 0) t->stack[i - 1].children += x;
  struct cell *c = cell_of(t, t->stack[i].func);
  if (c != 0) record(c, x);
}

/* The floor of a timed call on this host, for scripts/bench-native.sh: the least a hook can
 * do and still keep the function profiler's record of every call, for `-finstrument-functions`
 * (gcc's C hooks) and for `-pg -mfentry` on x86-64 (`__fentry__`, which must save every
 * argument register, and a return trampoline reached by replacing the function's return
 * address, which saves the return registers: what any user-space tracer of that kind does).
 *
 * For XRay (clang `-fxray-instrument`), built with -DFLOOR_XRAY and linked into the
 * instrumented program itself: a handler that compiler-rt's own runtime calls through its
 * trampolines (which save every argument register, xmm0-7 included, at each entry and exit),
 * its sleds patched by `__xray_patch` at start-up, the function keyed by its XRay id.
 *
 * Built as a preloadable library (the first two) or an object (XRay). Per thread: a shadow
 * stack of (function, TSC at entry, traced children's time, replaced return address) and an
 * open-addressing table of cells, one per function, each holding what tracestat's timed cell
 * holds: hits, the 128-bit sum, min, max, the 192-bit sum of squares and log2 buckets with 2
 * sub-buckets per power of two (counted one sample late, as tracestat does). Durations stay
 * in TSC ticks (no conversion to nanoseconds).
 *
 * Left out, on purpose: sites, filters and several users at once, the read-side sections that
 * make unregistering safe, reentrancy (signal handlers), longjmp and exception safety, thread
 * teardown, more than 1024 functions a thread, and any output (but the XRay half's count of
 * the calls it recorded, for a check). What tracestat costs over this is what those take.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

#define DEPTH 4096
#define CELLS 1024 /* a power of two */

struct frame { uintptr_t func; uint64_t start, children; uintptr_t ret; };
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

HOOK static struct thread *thread(void) {
  struct thread *t = self;
  if (__builtin_expect(t == 0, 0)) {
    t = self = calloc(1, sizeof *t);
    if (t == 0) abort();
  }
  return t;
}

/* Ends the top frame at `now`; its replaced return address. */
HOOK static uintptr_t end(struct thread *t, unsigned i, uint64_t now) {
  uint64_t x = now - t->stack[i].start;
  if (i > 0) t->stack[i - 1].children += x;
  struct cell *c = cell_of(t, t->stack[i].func);
  if (c != 0) record(c, x);
  return t->stack[i].ret;
}

/* A call's entry and end where the hook returns to the function itself (no return
 * redirected): past the stack's depth, a call is counted in `top` and not recorded. */
HOOK static inline void enter(uintptr_t func) {
  struct thread *t = thread();
  unsigned i = t->top++;
  if (i < DEPTH) {
    t->stack[i].func = func;
    t->stack[i].children = 0;
    t->stack[i].start = __rdtsc();
  }
}

HOOK static inline void leave(void) {
  uint64_t now = __rdtsc();
  struct thread *t = self;
  if (t == 0 || t->top == 0) return;
  unsigned i = --t->top;
  if (i < DEPTH) end(t, i, now);
}

#if defined(FLOOR_XRAY)
/* compiler-rt's interface (xray/xray_interface.h, a C++ header): the handler's kinds of
 * call, and the two calls that install it (1 when done) and patch the sleds (its
 * XRayPatchingStatus, SUCCESS = 1). */
enum xray_entry_type { XRAY_ENTRY, XRAY_EXIT, XRAY_TAIL, XRAY_LOG_ARGS_ENTRY };
int __xray_set_handler(void (*handler)(int32_t, enum xray_entry_type));
int __xray_patch(void);

/* Functions are keyed by their id, from 1 (never the empty cell's 0); a tail call's sled
 * ends the caller's frame before the callee's entry. */
__attribute__((xray_never_instrument)) static void handler(int32_t id, enum xray_entry_type type) {
  if (type == XRAY_ENTRY || type == XRAY_LOG_ARGS_ENTRY)
    enter((uint32_t)id);
  else
    leave();
}

/* A floor whose handler is not called would measure nothing: refused, it says so and stops. */
__attribute__((xray_never_instrument, constructor)) static void floor_xray_start(void) {
  if (__xray_set_handler(handler) != 1 || __xray_patch() != 1) {
    fputs("native-floor: compiler-rt refused the handler or the patching\n", stderr);
    abort();
  }
}

/* With NATIVE_FLOOR_CALLS set, the calls the main thread recorded, on stderr at exit: how a
 * check tells that the handler ran (the program's own answer cannot). */
__attribute__((xray_never_instrument, destructor)) static void floor_xray_report(void) {
  if (getenv("NATIVE_FLOOR_CALLS") == 0 || self == 0) return;
  uint64_t calls = 0;
  for (unsigned i = 0; i < CELLS; i++) calls += self->cells[i].hits;
  fprintf(stderr, "native-floor: %llu calls recorded\n", (unsigned long long)calls);
}
#else
HOOK void __cyg_profile_func_enter(void *func, void *site) {
  (void)site;
  enter((uintptr_t)func);
}

HOOK void __cyg_profile_func_exit(void *func, void *site) {
  (void)func, (void)site;
  leave();
}

#if defined(__x86_64__)
/* `-pg -mfentry`: `__fentry__` is called before the function's prologue, its arguments live
 * in registers: it saves rdi rsi rdx rcx r8 r9, rax (a variadic call's vector count), r10
 * and xmm0-7, calls floor_enter(its return address, the slot of the function's return
 * address), restores them. floor_enter keys the function by the first, pushes a frame and
 * points the slot at floor_return, which saves rax rdx xmm0 xmm1, gets the original address
 * from floor_exit and jumps there. No room on the stack: the return is left alone. */
#define TRAMPOLINE_HOOK HOOK __attribute__((visibility("hidden")))
TRAMPOLINE_HOOK uintptr_t floor_exit(void);
TRAMPOLINE_HOOK void floor_enter(uintptr_t func, uintptr_t *slot);
__asm__(".intel_syntax noprefix\n"
        ".globl __fentry__\n"
        ".type __fentry__, @function\n"
        "__fentry__:\n"
        "  push rbp\n  mov rbp, rsp\n  and rsp, -16\n  sub rsp, 208\n"
        "  mov [rsp], rdi\n  mov [rsp + 8], rsi\n  mov [rsp + 16], rdx\n"
        "  mov [rsp + 24], rcx\n  mov [rsp + 32], r8\n  mov [rsp + 40], r9\n"
        "  mov [rsp + 48], rax\n  mov [rsp + 56], r10\n"
        "  movaps [rsp + 80], xmm0\n  movaps [rsp + 96], xmm1\n  movaps [rsp + 112], xmm2\n"
        "  movaps [rsp + 128], xmm3\n  movaps [rsp + 144], xmm4\n  movaps [rsp + 160], xmm5\n"
        "  movaps [rsp + 176], xmm6\n  movaps [rsp + 192], xmm7\n"
        "  mov rdi, [rbp + 8]\n  lea rsi, [rbp + 16]\n  call floor_enter\n"
        "  mov rdi, [rsp]\n  mov rsi, [rsp + 8]\n  mov rdx, [rsp + 16]\n"
        "  mov rcx, [rsp + 24]\n  mov r8, [rsp + 32]\n  mov r9, [rsp + 40]\n"
        "  mov rax, [rsp + 48]\n  mov r10, [rsp + 56]\n"
        "  movaps xmm0, [rsp + 80]\n  movaps xmm1, [rsp + 96]\n  movaps xmm2, [rsp + 112]\n"
        "  movaps xmm3, [rsp + 128]\n  movaps xmm4, [rsp + 144]\n  movaps xmm5, [rsp + 160]\n"
        "  movaps xmm6, [rsp + 176]\n  movaps xmm7, [rsp + 192]\n"
        "  mov rsp, rbp\n  pop rbp\n  ret\n"
        ".size __fentry__, . - __fentry__\n"
        "floor_return:\n"
        "  push rbp\n  mov rbp, rsp\n  and rsp, -16\n  sub rsp, 48\n"
        "  mov [rsp], rax\n  mov [rsp + 8], rdx\n"
        "  movaps [rsp + 16], xmm0\n  movaps [rsp + 32], xmm1\n"
        "  call floor_exit\n  mov r11, rax\n"
        "  mov rax, [rsp]\n  mov rdx, [rsp + 8]\n"
        "  movaps xmm0, [rsp + 16]\n  movaps xmm1, [rsp + 32]\n"
        "  mov rsp, rbp\n  pop rbp\n  jmp r11\n"
        ".att_syntax prefix\n");

extern char floor_return[];

TRAMPOLINE_HOOK void floor_enter(uintptr_t func, uintptr_t *slot) {
  struct thread *t = thread();
  unsigned i = t->top;
  if (i >= DEPTH) return;
  t->top = i + 1;
  t->stack[i].func = func;
  t->stack[i].children = 0;
  t->stack[i].ret = *slot;
  *slot = (uintptr_t)floor_return;
  t->stack[i].start = __rdtsc();
}

TRAMPOLINE_HOOK uintptr_t floor_exit(void) {
  uint64_t now = __rdtsc();
  struct thread *t = self;
  return end(t, --t->top, now);
}
#endif /* __x86_64__ */
#endif /* FLOOR_XRAY */

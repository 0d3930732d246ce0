/*
 * redquorum-testkit clock shim: an LD_PRELOAD library that overrides gettimeofday() only.
 *
 * Why not libfaketime: it hangs Debian's jemalloc-linked redis-server (its constructor
 * allocates and takes locks that jemalloc's own initialisation re-enters). This shim never
 * allocates, never uses stdio, and takes no lock: it is safe to call from any thread, from
 * inside the allocator, and before main().
 *
 * Control file (path in $REDQUORUM_CLOCK_FILE), one ASCII line of four decimal integers:
 *
 *     <generation> <anchor_real_us> <anchor_fake_us> <rate_ppb>\n
 *
 * and the shim reports  fake(t) = anchor_fake_us + (real(t) - anchor_real_us) * rate_ppb / 1e9
 * where real(t) is CLOCK_REALTIME in microseconds. The writer (ClockControl in Rust) keeps
 * the same model and computes the anchors, so a rate change is continuous (it anchors at the
 * current fake time) and an offset change is a jump (it anchors at real + offset). Because
 * the formula is a function of real time alone, it does not matter when the shim notices a
 * new line. The writer replaces the file atomically (write a temporary file, rename it), so
 * a reader sees either the old or the new line, never a mix.
 *
 * The file is re-read at most every RECHECK_NS (10 ms, checked against CLOCK_MONOTONIC) by
 * whichever thread first notices that the interval has passed; other threads keep using
 * the current parameters. A missing or malformed file means "real time".
 *
 * Publication is lock-free: parameters live in a ring of seqlock-protected slots; a writer
 * fills the slot after the current one and then publishes its index, so a reader only
 * retries if a writer laps the whole ring while it copies three integers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h> /* struct timeval, without the nonnull prototype of gettimeofday */
#include <time.h>
#include <unistd.h>

#define RECHECK_NS 10000000LL
#define SLOTS 8
#define PPB 1000000000LL

struct slot {
    _Atomic uint64_t seq;
    _Atomic int64_t anchor_real;
    _Atomic int64_t anchor_fake;
    _Atomic int64_t rate_ppb;
};

static struct slot slots[SLOTS];
static _Atomic unsigned current;
static _Atomic int64_t next_check_ns;
static _Atomic int updating;
static char control_path[4096];
static int have_path;

__attribute__((constructor)) static void shim_init(void) {
    const char *p = getenv("REDQUORUM_CLOCK_FILE");
    if (p != NULL) {
        size_t n = strlen(p);
        if (n > 0 && n < sizeof control_path) {
            memcpy(control_path, p, n + 1);
            have_path = 1;
        }
    }
}

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Parses a signed decimal integer at *p, advancing past it and any leading spaces. */
static int parse_i64(const char **p, const char *end, int64_t *out) {
    const char *s = *p;
    while (s < end && *s == ' ') s++;
    int neg = 0;
    if (s < end && *s == '-') { neg = 1; s++; }
    if (s >= end || *s < '0' || *s > '9') return 0;
    int64_t v = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*s - '0');
        s++;
    }
    *out = neg ? -v : v;
    *p = s;
    return 1;
}

static void publish(int64_t anchor_real, int64_t anchor_fake, int64_t rate_ppb) {
    unsigned next = (atomic_load_explicit(&current, memory_order_relaxed) + 1) % SLOTS;
    struct slot *s = &slots[next];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->anchor_real, anchor_real, memory_order_relaxed);
    atomic_store_explicit(&s->anchor_fake, anchor_fake, memory_order_relaxed);
    atomic_store_explicit(&s->rate_ppb, rate_ppb, memory_order_relaxed);
    atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
    atomic_store_explicit(&current, next, memory_order_release);
}

static void reload(void) {
    int fd = open(control_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[160];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n <= 0) return;
    const char *p = buf, *end = buf + n;
    int64_t generation, anchor_real, anchor_fake, rate_ppb;
    if (!parse_i64(&p, end, &generation) || !parse_i64(&p, end, &anchor_real) ||
        !parse_i64(&p, end, &anchor_fake) || !parse_i64(&p, end, &rate_ppb) || rate_ppb <= 0)
        return;
    (void)generation;
    unsigned cur = atomic_load_explicit(&current, memory_order_acquire);
    struct slot *s = &slots[cur];
    if (atomic_load_explicit(&s->anchor_real, memory_order_relaxed) == anchor_real &&
        atomic_load_explicit(&s->anchor_fake, memory_order_relaxed) == anchor_fake &&
        atomic_load_explicit(&s->rate_ppb, memory_order_relaxed) == rate_ppb)
        return;
    publish(anchor_real, anchor_fake, rate_ppb);
}

static void maybe_reload(void) {
    if (!have_path) return;
    int64_t mono = now_ns(CLOCK_MONOTONIC);
    int64_t due = atomic_load_explicit(&next_check_ns, memory_order_relaxed);
    if (mono < due) return;
    /* One thread reloads; the others go on with the current parameters (no waiting). */
    if (!atomic_compare_exchange_strong(&next_check_ns, &due, mono + RECHECK_NS)) return;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&updating, &expected, 1)) return;
    int saved_errno = errno;
    reload();
    errno = saved_errno;
    atomic_store(&updating, 0);
}

static int64_t fake_us(int64_t real_us) {
    for (;;) {
        unsigned cur = atomic_load_explicit(&current, memory_order_acquire);
        struct slot *s = &slots[cur];
        uint64_t seq1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t ar = atomic_load_explicit(&s->anchor_real, memory_order_relaxed);
        int64_t af = atomic_load_explicit(&s->anchor_fake, memory_order_relaxed);
        int64_t rate = atomic_load_explicit(&s->rate_ppb, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        uint64_t seq2 = atomic_load_explicit(&s->seq, memory_order_relaxed);
        if (seq1 != seq2 || (seq1 & 1)) continue;
        /* A zero rate is the initial all-zero slot: real time. */
        if (rate == 0 || (rate == PPB && ar == af)) return real_us;
        __int128 delta = (__int128)(real_us - ar) * rate;
        /* Floor division, so that fake time is monotonic across the zero crossing. */
        __int128 q = delta / PPB;
        if (delta % PPB < 0) q -= 1;
        return af + (int64_t)q;
    }
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    maybe_reload();
    if (tv != NULL) {
        int64_t us = fake_us(now_ns(CLOCK_REALTIME) / 1000);
        int64_t sec = us / 1000000, usec = us % 1000000;
        if (usec < 0) { usec += 1000000; sec -= 1; }
        tv->tv_sec = (time_t)sec;
        tv->tv_usec = (suseconds_t)usec;
    }
    if (tz != NULL) {
        /* struct timezone is obsolete; report UTC as glibc does. */
        memset(tz, 0, 2 * sizeof(int));
    }
    return 0;
}

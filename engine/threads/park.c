/* Futex (Linux) or condition-variable parking; see park.h. */
#include "park.h"

#if defined(__linux__) && !defined(HWT_PARK_FORCE_CONDVAR)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void hwt_park_wait(_Atomic uint32_t *w, uint32_t expected) {
  /* The kernel compares *w with expected under its own lock, so a wake that
   * lands between our last check and this call is not lost. */
  syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void hwt_park_wake(_Atomic uint32_t *w) {
  syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, 1 << 30, NULL, NULL, 0);
}

#else
#include <pthread.h>

/* Stripes keep unrelated words (different teams) from sharing one condvar
 * broadcast; 16 is plenty for a fallback that is off the fast path. */
#define HWT_PARK_STRIPES 16

static pthread_mutex_t park_mu[HWT_PARK_STRIPES] = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER};
static pthread_cond_t park_cv[HWT_PARK_STRIPES] = {
    PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
    PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
    PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
    PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
    PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
    PTHREAD_COND_INITIALIZER};

static unsigned stripe(const void *w) {
  /* Words live on their own cache lines, so the low 6 bits carry nothing. */
  return (unsigned)(((uintptr_t)w >> 6) % HWT_PARK_STRIPES);
}

void hwt_park_wait(_Atomic uint32_t *w, uint32_t expected) {
  unsigned s = stripe(w);
  pthread_mutex_lock(&park_mu[s]);
  while (atomic_load(w) == expected) pthread_cond_wait(&park_cv[s], &park_mu[s]);
  pthread_mutex_unlock(&park_mu[s]);
}

void hwt_park_wake(_Atomic uint32_t *w) {
  unsigned s = stripe(w);
  /* Taking the lock orders this wake after any waiter's check of *w. */
  pthread_mutex_lock(&park_mu[s]);
  pthread_mutex_unlock(&park_mu[s]);
  pthread_cond_broadcast(&park_cv[s]);
}
#endif

/* lock.h - the one lock type tide uses.  An adaptive pthread mutex: it spins briefly
 * (tide's critical sections are short) and then sleeps, and it is safe to take before
 * constructors run.  fork() handling re-initialises every lock in the child. */
#ifndef TIDE_LOCK_H
#define TIDE_LOCK_H

#include <pthread.h>

typedef struct lock_s {
    pthread_mutex_t m;
} lock_t;

#define LOCK_INITIALIZER { PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP }

static inline void lock_init(lock_t *l)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&l->m, &attr);
    pthread_mutexattr_destroy(&attr);
}
static inline void lock_acquire(lock_t *l) { pthread_mutex_lock(&l->m); }
static inline void lock_release(lock_t *l) { pthread_mutex_unlock(&l->m); }
static inline int lock_try(lock_t *l) { return pthread_mutex_trylock(&l->m) == 0; }

#endif

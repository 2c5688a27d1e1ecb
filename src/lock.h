/* lock.h - the one lock type tide uses.  A pthread mutex: it sleeps rather than spins
 * (the machines tide targets have few cores), and it is safe to take before
 * constructors run.  fork() handling re-initialises every lock in the child. */
#ifndef TIDE_LOCK_H
#define TIDE_LOCK_H

#include <pthread.h>

typedef struct lock_s {
    pthread_mutex_t m;
} lock_t;

#define LOCK_INITIALIZER { PTHREAD_MUTEX_INITIALIZER }

static inline void lock_init(lock_t *l) { pthread_mutex_init(&l->m, NULL); }
static inline void lock_acquire(lock_t *l) { pthread_mutex_lock(&l->m); }
static inline void lock_release(lock_t *l) { pthread_mutex_unlock(&l->m); }
static inline int lock_try(lock_t *l) { return pthread_mutex_trylock(&l->m) == 0; }

#endif

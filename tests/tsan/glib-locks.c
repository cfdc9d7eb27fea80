/* ThreadSanitizer cannot see GLib's locks: on Linux GMutex, GCond and
 * GRWLock are bare futexes, and GThreadPool hands tasks over through them,
 * so every access they order looks like a race.  Linked into the
 * executables of a -DHTTPHSM_SANITIZE=thread build, this file gives the
 * calls our code makes the same API on pthreads, which TSan understands,
 * and tells TSan about the pool's hand-overs.  Calls inside libglib stay
 * bound to its own implementation, on its own objects; none of ours is
 * passed to it.  Test builds only. */
#include <dlfcn.h>
#include <glib.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

void __tsan_acquire(void *addr);
void __tsan_release(void *addr);

/* GLib's lock types are a pointer wide: they hold a pointer to the
 * pthread object, made on first use (a zeroed static lock is valid). */
static void *lazy(gpointer *slot, void *(*make)(void), void (*destroy)(void *))
{
	void *made, *seen = g_atomic_pointer_get(slot);

	if (seen)
		return seen;
	made = make();
	if (g_atomic_pointer_compare_and_exchange(slot, NULL, made))
		return made;
	destroy(made);
	return g_atomic_pointer_get(slot);
}

static void *mutex_make(void)
{
	pthread_mutex_t *m = g_malloc(sizeof(*m));

	pthread_mutex_init(m, NULL);
	return m;
}

static void mutex_destroy(void *m)
{
	pthread_mutex_destroy(m);
	g_free(m);
}

static pthread_mutex_t *mutex_of(GMutex *mutex)
{
	return lazy(&mutex->p, mutex_make, mutex_destroy);
}

void g_mutex_init(GMutex *mutex)
{
	mutex->p = NULL;
}

void g_mutex_clear(GMutex *mutex)
{
	if (mutex->p)
		mutex_destroy(mutex->p);
	mutex->p = NULL;
}

void g_mutex_lock(GMutex *mutex)
{
	pthread_mutex_lock(mutex_of(mutex));
}

void g_mutex_unlock(GMutex *mutex)
{
	pthread_mutex_unlock(mutex_of(mutex));
}

gboolean g_mutex_trylock(GMutex *mutex)
{
	return pthread_mutex_trylock(mutex_of(mutex)) == 0;
}

static void *cond_make(void)
{
	pthread_cond_t *c = g_malloc(sizeof(*c));
	pthread_condattr_t attr;

	/* g_cond_wait_until() deadlines are g_get_monotonic_time() values. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(c, &attr);
	pthread_condattr_destroy(&attr);
	return c;
}

static void cond_destroy(void *c)
{
	pthread_cond_destroy(c);
	g_free(c);
}

static pthread_cond_t *cond_of(GCond *cond)
{
	return lazy(&cond->p, cond_make, cond_destroy);
}

void g_cond_init(GCond *cond)
{
	cond->p = NULL;
}

void g_cond_clear(GCond *cond)
{
	if (cond->p)
		cond_destroy(cond->p);
	cond->p = NULL;
}

void g_cond_wait(GCond *cond, GMutex *mutex)
{
	pthread_cond_wait(cond_of(cond), mutex_of(mutex));
}

gboolean g_cond_wait_until(GCond *cond, GMutex *mutex, gint64 end_time)
{
	struct timespec ts = { end_time / G_USEC_PER_SEC, (end_time % G_USEC_PER_SEC) * 1000 };

	return pthread_cond_timedwait(cond_of(cond), mutex_of(mutex), &ts) == 0;
}

void g_cond_signal(GCond *cond)
{
	pthread_cond_signal(cond_of(cond));
}

void g_cond_broadcast(GCond *cond)
{
	pthread_cond_broadcast(cond_of(cond));
}

static void *rw_lock_make(void)
{
	pthread_rwlock_t *l = g_malloc(sizeof(*l));

	pthread_rwlock_init(l, NULL);
	return l;
}

static void rw_lock_destroy(void *l)
{
	pthread_rwlock_destroy(l);
	g_free(l);
}

static pthread_rwlock_t *rw_lock_of(GRWLock *lock)
{
	return lazy(&lock->p, rw_lock_make, rw_lock_destroy);
}

void g_rw_lock_init(GRWLock *lock)
{
	lock->p = NULL;
}

void g_rw_lock_clear(GRWLock *lock)
{
	if (lock->p)
		rw_lock_destroy(lock->p);
	lock->p = NULL;
}

void g_rw_lock_writer_lock(GRWLock *lock)
{
	pthread_rwlock_wrlock(rw_lock_of(lock));
}

void g_rw_lock_writer_unlock(GRWLock *lock)
{
	pthread_rwlock_unlock(rw_lock_of(lock));
}

void g_rw_lock_reader_lock(GRWLock *lock)
{
	pthread_rwlock_rdlock(rw_lock_of(lock));
}

void g_rw_lock_reader_unlock(GRWLock *lock)
{
	pthread_rwlock_unlock(rw_lock_of(lock));
}

/* ---- Thread pools: push happens before the task; tasks before free ---- */

typedef struct {
	GFunc func;
	gpointer user_data;
	int done;                /* only its address matters: the tasks' release point */
} Pool;

static GHashTable *pools; /* GThreadPool * -> Pool *; protected by pools_lock */
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

static void run_task(gpointer data, gpointer user_data)
{
	Pool *pool = user_data;

	__tsan_acquire(data);
	pool->func(data, pool->user_data);
	__tsan_release(&pool->done);
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

GThreadPool *g_thread_pool_new(GFunc func, gpointer user_data, gint max_threads,
			       gboolean exclusive, GError **error)
{
	Pool *pool = g_new0(Pool, 1);
	GThreadPool *real;

	pool->func = func;
	pool->user_data = user_data;
	real = REAL(g_thread_pool_new)(run_task, pool, max_threads, exclusive, error);
	pthread_mutex_lock(&pools_lock);
	if (!pools)
		pools = g_hash_table_new(NULL, NULL);
	g_hash_table_insert(pools, real, pool);
	pthread_mutex_unlock(&pools_lock);
	return real;
}

gboolean g_thread_pool_push(GThreadPool *pool, gpointer data, GError **error)
{
	__tsan_release(data);
	return REAL(g_thread_pool_push)(pool, data, error);
}

void g_thread_pool_free(GThreadPool *real, gboolean immediate, gboolean wait_)
{
	Pool *pool;

	pthread_mutex_lock(&pools_lock);
	pool = g_hash_table_lookup(pools, real);
	g_hash_table_remove(pools, real);
	pthread_mutex_unlock(&pools_lock);
	REAL(g_thread_pool_free)(real, immediate, wait_);
	if (!wait_)
		return; /* its tasks may still run: pool stays (a test-build leak) */
	__tsan_acquire(&pool->done);
	g_free(pool);
}

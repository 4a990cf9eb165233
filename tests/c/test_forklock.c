/*
 * test_forklock.c -- leaf locks over fork() (src/forklock.c), and the host
 * backend's table of captured streams on them (src/backend/captured_host.c,
 * whose lock a child hung on when another thread held it at the fork).
 *
 * A forklock held by another thread when fork() is called is let go before
 * the child is made: the child finds it free and what it guards whole,
 * while a plain mutex the same thread holds over the fork stays held in the
 * child (the hang these locks prevent, shown to be what the test sets up).
 * Then forks while two threads ask and change the captured-streams table
 * round after round: every child asks it too and exits.  A child that hangs is
 * ended by alarm() and counts as a failure.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "forklock.h"
#include "backend/captured_host.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pygpu_forklock leaf = PYGPU_FORKLOCK_INIT;
static pthread_mutex_t plain = PTHREAD_MUTEX_INITIALIZER;
static int guarded;                 /* written under `leaf`: 1 half way, 2 whole */
static atomic_int holding, stop;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Holds `plain`, then `leaf` for 100 ms while half way through its write,
 * then `plain` for another second. */
static void *holder(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&plain);
    pygpu_forklock_lock(&leaf);
    guarded = 1;
    atomic_store(&holding, 1);
    sleep_ms(100);
    guarded = 2;
    pygpu_forklock_unlock(&leaf);
    sleep_ms(1000);
    pthread_mutex_unlock(&plain);
    return NULL;
}

/* The child's exit status: 0 if `leaf` was free and whole, `plain` held. */
static int child_finds(void)
{
    alarm(10);
    int r = 0;
    if (pthread_mutex_trylock(&leaf.mu) != 0)
        r |= 1;
    else if (guarded != 2)
        r |= 2;
    else
        pthread_mutex_unlock(&leaf.mu);
    if (pthread_mutex_trylock(&plain) != EBUSY)
        r |= 4;
    if (!r) {
        pygpu_forklock_lock(&leaf);         /* (let go in the child: usable as ever) */
        pygpu_forklock_unlock(&leaf);
    }
    return r;
}

/* fork() while a thread holds both locks. */
static void fork_while_held(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, holder, NULL) == 0);
    while (!atomic_load(&holding))
        sleep_ms(1);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_finds());
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        fprintf(stderr, "child: status %d (1 leaf held, 2 leaf's data half written, 4 plain not held)\n", status);
    CHECK(atomic_load(&leaf.known) == 1);
    pthread_join(t, NULL);
}

/* Adds, asks about and removes captures, yielding between rounds (a lock
 * taken again at once can starve the forking thread under valgrind). */
static void *capturer(void *arg)
{
    pygpu_stream_t s = (pygpu_stream_t)arg;
    while (!atomic_load(&stop)) {
        (void)pygpu_captured_add(s, 0);
        (void)pygpu_captured_blocking(0, 0);
        (void)pygpu_captured_has(s);
        (void)pygpu_captured_remove(s);
        (void)pygpu_captured_blocking(0, 0);
        sched_yield();
    }
    return NULL;
}

static void fork_beside_captures(int forks)
{
    static char streams[2];
    pthread_t t[2];
    int hung = 0;
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, capturer, &streams[i]) == 0);
    for (int k = 0; k < forks && !hung; k++) {      /* (the first hang is enough) */
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10);
            (void)pygpu_captured_blocking(0, 0);
            (void)pygpu_captured_add(&streams[1], 0);
            (void)pygpu_captured_remove(&streams[1]);
            _exit(0);
        }
        int status = -1;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        hung += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(hung == 0);
    if (hung)
        fprintf(stderr, "a child did not exit cleanly (it hung on the table's lock)\n");
    CHECK(pygpu_captured_has(&streams[0]) == 0 && pygpu_captured_blocking(0, 0) == 0);      /* (all removed) */
}

int main(void)
{
    fork_while_held();
    fork_beside_captures(100);
    return check_done("test_forklock");
}

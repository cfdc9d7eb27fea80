/* Starting a daemon that reports whether its start-up worked.
 *
 * The parent stays in the foreground until the child says "ready" (mounted
 * and serving) or "failed: why", and exits with a matching status, so that
 * `httphsm mount ... && use-the-mount` is reliable and errors reach the
 * terminal. */
#ifndef HSM_DAEMON_H
#define HSM_DAEMON_H

#include <glib.h>

/* In background mode, forks and returns only in the child.  In foreground
 * mode, does nothing.  Exits the process if fork() fails. */
void hsm_daemon_start(gboolean background);
/* Start-up went well: releases the parent and detaches from the terminal. */
void hsm_daemon_ready(void);
/* Unmounted: going away (told to systemd, as READY was). */
void hsm_daemon_stopping(void);
/* Start-up failed: the parent prints message and exits 1; so does the
 * caller after cleaning up. */
void hsm_daemon_failed(const char *message);

#endif

/* Internals shared by daemon.c and events.c of fanotify mode. */
#ifndef HSM_FANOTIFY_PRIVATE_H
#define HSM_FANOTIFY_PRIVATE_H

#include "fanotify-mode.h"
#include "guardian.h"
#include "fanotify-abi.h"
#include "kernel-caps.h"

#define FILE_GROUP 0            /* FAN_PRE_ACCESS on files (and dirs, patched kernel) */
#define DIR_GROUP 1             /* FAN_OPEN_PERM on dirs, mainline kernels only */

struct HsmFanotify {
	HsmTree *tree;
	char *mountpoint;
	HsmKernelCaps caps;
	gboolean lazy_mappings; /* FAN_PRE_FAULT marked: mappings fill by fault */
	int mount_fd;           /* the detached clone, until attached */
	guint64 mount_id;       /* the clone's, which events' paths are on */
	int groups[2];
	guint64 marks[2];       /* the events each group's mount mark reports */
	guint n_groups;
	HsmGuardian *guardian;

	int wake_fd;            /* eventfd: tells the readers to stop */
	int null_fd;            /* /dev/null: keeps an answered event's fd number */
	GThread *readers[2];
	GThreadPool *workers;
	GMutex lock;
	GCond room;             /* a queued event was handled */
	guint queued;           /* events read, not answered yet; protected by lock */
	gint errno_responses;   /* atomic: FAN_DENY_ERRNO accepted */
};

/* The events of files that a complete file's ignore mark silences. */
static inline guint64 hsm_fan_content_events(const HsmFanotify *fan)
{
	return fan->marks[FILE_GROUP] & (FAN_PRE_ACCESS | FAN_PRE_FAULT);
}

/* events.c */
void hsm_fanotify_events_start(HsmFanotify *fan);
/* Finishes the events a dead daemon left (a restarted daemon). */
void hsm_fanotify_events_resume(HsmFanotify *fan);
/* Before the readers start: fails (EIO) the events a dead daemon read but
 * did not record in the guardian's table (see hsm_fan_answer_unclaimed). */
void hsm_fanotify_events_answer_unrecorded(HsmFanotify *fan);
/* Reads what is left, answers everything, stops the threads. */
void hsm_fanotify_events_stop(HsmFanotify *fan);

#endif

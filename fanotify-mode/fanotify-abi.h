/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * fanotify-abi.h - the fanotify ABI that httphsm needs beyond Debian 12's
 * <sys/fanotify.h> / <linux/fanotify.h> (Linux 6.1 headers).
 *
 * Two kinds of definitions:
 *  - mainline ones (Linux 6.14+): pre-content events, range records and
 *    errno responses.  Same names and values as mainline, each behind
 *    #ifndef so that newer system headers win without conflict;
 *  - the lookup event of the httphsm kernel series (kernel-patches/), which
 *    mainline does not have.  Its names carry "HSM" so that they cannot clash
 *    with a future mainline definition, and they are not behind #ifndef:
 *    the values must be exactly the ones the patched kernel uses.
 *
 * See kernel-patches/README for the semantics.  C11, no GNU extensions.
 */
#ifndef HTTPHSM_FANOTIFY_ABI_H
#define HTTPHSM_FANOTIFY_ABI_H

#include <sys/fanotify.h>
#include <linux/types.h>

/* ---- mainline (6.14+) ---------------------------------------------------- */

/* Pre-content access event: before a byte range of a file is read, written,
 * truncated or mmapped.  Only for FAN_CLASS_PRE_CONTENT groups. */
#ifndef FAN_PRE_ACCESS
#define FAN_PRE_ACCESS			0x00100000
#endif

/* Info record carrying the accessed range, rounded out to pages. */
#ifndef FAN_EVENT_INFO_TYPE_RANGE
#define FAN_EVENT_INFO_TYPE_RANGE	6
struct fanotify_event_info_range {
	struct fanotify_event_info_header hdr;
	__u32 pad;
	__u64 offset;
	__u64 count;
};
#endif

/* Deny a permission event with a chosen errno (pre-content groups only;
 * EIO, EPERM, EBUSY, ETXTBSY, EAGAIN, ENOSPC or EDQUOT). */
#ifndef FAN_ERRNO_BITS
#define FAN_ERRNO_BITS			8
#define FAN_ERRNO_SHIFT			(32 - FAN_ERRNO_BITS)
#define FAN_ERRNO_MASK			((1 << FAN_ERRNO_BITS) - 1)
#endif
#ifndef FAN_DENY_ERRNO
#define FAN_DENY_ERRNO(err) \
	(FAN_DENY | ((((__u32)(err)) & FAN_ERRNO_MASK) << FAN_ERRNO_SHIFT))
#endif

/* Present in 6.1 headers already; kept for older headers. */
#ifndef FAN_MARK_EVICTABLE
#define FAN_MARK_EVICTABLE		0x00000200
#endif
#ifndef FAN_MARK_IGNORE
#define FAN_MARK_IGNORE			0x00000400
#endif
#ifndef FAN_MARK_IGNORE_SURV
#define FAN_MARK_IGNORE_SURV	(FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY)
#endif

/* ---- httphsm kernel series (not mainline) --------------------------------
 *
 * Directory populate on listing: FAN_PRE_ACCESS | FAN_ONDIR, reported before
 * getdents() lists a marked directory, without a range record.
 *
 * Directory populate on lookup: FAN_HSM_LOOKUP, reported before a name that
 * is not in the dentry cache is looked up in a marked directory (each path
 * component, and the last component of open(), stat(), ...).  The event fd
 * is the directory; the name comes in a FAN_EVENT_INFO_TYPE_HSM_NAME record.
 * The listener creates the entry relative to the event fd (lookups relative
 * to an event fd raise no lookup events) and answers FAN_ALLOW.
 */
#define FAN_HSM_LOOKUP			0x00800000
#define FAN_EVENT_INFO_TYPE_HSM_NAME	64

/*
 * Page faults of lazy mappings: a listener that marks FAN_PRE_FAULT (with
 * FAN_PRE_ACCESS) no longer gets mainline's FAN_PRE_ACCESS for the whole
 * range at mmap() time (unless the mapping is populated: MAP_POPULATE,
 * MAP_LOCKED); instead each page fault that reaches the file system reports
 * FAN_PRE_FAULT with a range record (the faulting page and the pages around
 * it that the kernel maps with it), raised after mmap_lock was dropped.
 * FAN_HSM_NOFILL comes with FAN_PRE_FAULT when the fault happened inside a
 * system call (a buffer in the mapping): the caller may hold locks of this
 * file system, so the listener must not write to it and answers from what
 * is already there (FAN_ALLOW) or denies (the system call gets EFAULT).
 */
#define FAN_PRE_FAULT			0x00400000
#define FAN_HSM_NOFILL			0x00200000

struct fanotify_event_info_hsm_name {
	struct fanotify_event_info_header hdr;
	__u32 name_len;		/* strlen(name) */
	char name[];		/* NUL terminated, NUL padded to hdr.len */
};

/* Every event httphsm asks for that waits for an answer. */
#define HSM_FAN_PERMISSION_EVENTS \
	(FAN_OPEN_PERM | FAN_ACCESS_PERM | FAN_PRE_ACCESS | FAN_HSM_LOOKUP | FAN_PRE_FAULT)

#endif /* HTTPHSM_FANOTIFY_ABI_H */

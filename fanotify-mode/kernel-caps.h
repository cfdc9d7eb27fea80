/* What the running kernel's fanotify can do for fanotify mode. */
#ifndef HSM_KERNEL_CAPS_H
#define HSM_KERNEL_CAPS_H

#include <glib.h>

typedef struct {
	gboolean dir_readdir;   /* FAN_PRE_ACCESS | FAN_ONDIR: before readdir (patched 6.1) */
	gboolean dir_lookup;    /* FAN_HSM_LOOKUP: before a dcache-missing lookup (patched 6.1) */
	gboolean page_faults;   /* FAN_PRE_FAULT: lazy mappings (patched 6.1) */
} HsmKernelCaps;

/* Probes with a throw-away group on mount_fd (an O_PATH descriptor of the
 * mount to serve).  Fails when pre-content events are unavailable: kernel
 * older than 6.14 and unpatched, or a file system that does not opt in. */
gboolean hsm_kernel_probe(int mount_fd, HsmKernelCaps *caps, GError **err);

/* One line for the log and --help: which directory path is used. */
const char *hsm_kernel_caps_describe(const HsmKernelCaps *caps);

#endif

/* The core's GError domain.  Codes are errno values, so that a front end can
 * hand them to the kernel as they are (ENOENT, EIO, EACCES...). */
#ifndef HSM_ERROR_H
#define HSM_ERROR_H

#include <glib.h>

#define HSM_ERROR (hsm_error_quark())
GQuark hsm_error_quark(void);

/* Sets err to "WHAT PATH: strerror(code)" in HSM_ERROR with code; FALSE. */
gboolean hsm_errno_error(GError **err, int code, const char *what, const char *path);

/* The errno of err: its code in HSM_ERROR, the errno behind a G_FILE_ERROR
 * (a full cache disk is ENOSPC), else EIO. */
int hsm_error_errno(const GError *err);

#endif

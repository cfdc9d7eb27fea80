/* The core's GError domain; see error.h. */
#include "error.h"

#include <errno.h>

G_DEFINE_QUARK(httphsm-error-quark, hsm_error)

/* GLib's file errors are errnos under other names (g_file_error_from_errno
 * in reverse); the ones a cache write can meet matter most (ENOSPC). */
static int errno_of_file_error(int code)
{
	static const struct {
		GFileError code;
		int errnum;
	} table[] = {
		{ G_FILE_ERROR_EXIST, EEXIST },   { G_FILE_ERROR_ISDIR, EISDIR },
		{ G_FILE_ERROR_ACCES, EACCES },   { G_FILE_ERROR_NAMETOOLONG, ENAMETOOLONG },
		{ G_FILE_ERROR_NOENT, ENOENT },   { G_FILE_ERROR_NOTDIR, ENOTDIR },
		{ G_FILE_ERROR_NXIO, ENXIO },     { G_FILE_ERROR_NODEV, ENODEV },
		{ G_FILE_ERROR_ROFS, EROFS },     { G_FILE_ERROR_TXTBSY, ETXTBSY },
		{ G_FILE_ERROR_FAULT, EFAULT },   { G_FILE_ERROR_LOOP, ELOOP },
		{ G_FILE_ERROR_NOSPC, ENOSPC },   { G_FILE_ERROR_NOMEM, ENOMEM },
		{ G_FILE_ERROR_MFILE, EMFILE },   { G_FILE_ERROR_NFILE, ENFILE },
		{ G_FILE_ERROR_BADF, EBADF },     { G_FILE_ERROR_INVAL, EINVAL },
		{ G_FILE_ERROR_PIPE, EPIPE },     { G_FILE_ERROR_AGAIN, EAGAIN },
		{ G_FILE_ERROR_INTR, EINTR },     { G_FILE_ERROR_IO, EIO },
		{ G_FILE_ERROR_PERM, EPERM },     { G_FILE_ERROR_NOSYS, ENOSYS },
	};

	for (gsize i = 0; i < G_N_ELEMENTS(table); i++)
		if ((int)table[i].code == code)
			return table[i].errnum;
	return EIO;
}

gboolean hsm_errno_error(GError **err, int code, const char *what, const char *path)
{
	g_set_error(err, HSM_ERROR, code, "%s %s: %s", what, path, g_strerror(code));
	return FALSE;
}

int hsm_error_errno(const GError *err)
{
	if (err && err->domain == HSM_ERROR && err->code > 0)
		return err->code;
	if (err && err->domain == G_FILE_ERROR)
		return errno_of_file_error(err->code);
	return EIO;
}

/* The core's GError domain; see error.h. */
#include "error.h"

#include <errno.h>

G_DEFINE_QUARK(httphsm-error-quark, hsm_error)

int hsm_error_errno(const GError *err)
{
	if (err && err->domain == HSM_ERROR && err->code > 0)
		return err->code;
	return EIO;
}

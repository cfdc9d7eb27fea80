/* Errors leave core/ as errnos, whatever GLib domain they were born in. */
#include "error.h"

#include <errno.h>

static void test_errno_of_domains(void)
{
	g_autoptr(GError) hsm = g_error_new_literal(HSM_ERROR, ENOENT, "gone");
	g_autoptr(GError) full = g_error_new_literal(G_FILE_ERROR, G_FILE_ERROR_NOSPC, "full");
	g_autoptr(GError) ro = g_error_new_literal(G_FILE_ERROR, G_FILE_ERROR_ROFS, "ro");
	g_autoptr(GError) other = g_error_new_literal(G_KEY_FILE_ERROR, 0, "parse");

	g_assert_cmpint(hsm_error_errno(hsm), ==, ENOENT);
	g_assert_cmpint(hsm_error_errno(full), ==, ENOSPC);
	g_assert_cmpint(hsm_error_errno(ro), ==, EROFS);
	g_assert_cmpint(hsm_error_errno(other), ==, EIO);
	g_assert_cmpint(hsm_error_errno(NULL), ==, EIO);
	/* Every file error maps back to the errno it came from. */
	for (int e = 1; e < 134; e++) {
		g_autoptr(GError) err = g_error_new_literal(G_FILE_ERROR, g_file_error_from_errno(e), "");

		if (g_file_error_from_errno(e) != G_FILE_ERROR_FAILED)
			g_assert_cmpint(g_file_error_from_errno(hsm_error_errno(err)), ==,
					g_file_error_from_errno(e));
	}
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/error/errno-of-domains", test_errno_of_domains);
	return g_test_run();
}

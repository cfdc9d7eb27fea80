/* /proc/self/mountinfo lines, including escaped and odd ones. */
#include "mountinfo.h"

static void test_parse(void)
{
	const char *text =
		"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		"97 22 0:52 /cache/tree /mnt/with\\040space ro master:3 - ext4 /dev/loop0 rw\n"
		"garbage line\n"
		"x 22 0:1 / /bad rw - tmpfs t rw\n"
		"98 22 0:53 / /mnt/fuse rw,nosuid - fuse.httphsm http://h/ ro\n"
		"99 22 0:54 / /no/type rw\n";
	g_autoptr(GPtrArray) mounts = hsm_mountinfo_parse(text);
	const HsmMount *m;

	g_assert_cmpuint(mounts->len, ==, 3);
	m = mounts->pdata[1];
	g_assert_cmpuint(m->id, ==, 97);
	g_assert_cmpstr(m->mount_point, ==, "/mnt/with space");
	g_assert_cmpstr(m->fs_type, ==, "ext4");
	m = mounts->pdata[2];
	g_assert_cmpstr(m->fs_type, ==, "fuse.httphsm");
}

static void test_read_self(void)
{
	g_autoptr(GPtrArray) mounts = hsm_mountinfo_read();
	gboolean root = FALSE;

	g_assert_nonnull(mounts);
	for (guint i = 0; i < mounts->len; i++)
		root |= !g_strcmp0(((HsmMount *)mounts->pdata[i])->mount_point, "/");
	g_assert_true(root);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/mountinfo/parse", test_parse);
	g_test_add_func("/mountinfo/read-self", test_read_self);
	return g_test_run();
}

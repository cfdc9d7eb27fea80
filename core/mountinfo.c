/* /proc/self/mountinfo: see mountinfo.h.  A line is
 *   ID PARENT MAJOR:MINOR ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
 * with spaces and the like in paths escaped as \ooo. */
#include "mountinfo.h"

#include <string.h>

static void free_mount(gpointer data)
{
	HsmMount *mount = data;

	g_free(mount->mount_point);
	g_free(mount->fs_type);
	g_free(mount);
}

static HsmMount *parse_line(const char *line)
{
	g_auto(GStrv) halves = g_strsplit(line, " - ", 2);
	g_auto(GStrv) fields = NULL;
	g_auto(GStrv) rest = NULL;
	HsmMount *mount;
	char *end;
	guint64 id;

	if (!halves[0] || !halves[1])
		return NULL;
	fields = g_strsplit(halves[0], " ", -1);
	rest = g_strsplit(halves[1], " ", -1);
	if (g_strv_length(fields) < 5 || !rest[0] || !g_ascii_isdigit(fields[0][0]))
		return NULL;
	id = g_ascii_strtoull(fields[0], &end, 10);
	if (*end)
		return NULL;
	mount = g_new0(HsmMount, 1);
	mount->id = id;
	mount->mount_point = g_strcompress(fields[4]);
	mount->fs_type = g_strdup(rest[0]);
	return mount;
}

GPtrArray *hsm_mountinfo_parse(const char *text)
{
	GPtrArray *mounts = g_ptr_array_new_with_free_func(free_mount);
	g_auto(GStrv) lines = g_strsplit(text, "\n", -1);

	for (char **line = lines; *line; line++) {
		HsmMount *mount = parse_line(*line);

		if (mount)
			g_ptr_array_add(mounts, mount);
	}
	return mounts;
}

GPtrArray *hsm_mountinfo_read(void)
{
	g_autofree char *text = NULL;

	if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL))
		return NULL;
	return hsm_mountinfo_parse(text);
}

/* Log routing for the daemon; see log.h. */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

static gboolean log_verbose;
static gboolean log_info_to_stderr;
static gboolean log_stderr = TRUE;
static FILE *log_file;
static GMutex log_lock;

static const char *level_name(GLogLevelFlags level)
{
	if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
		return "error";
	if (level & G_LOG_LEVEL_WARNING)
		return "warning";
	if (level & G_LOG_LEVEL_DEBUG)
		return "debug";
	return "info";
}

static const char *field(const GLogField *fields, gsize count, const char *key)
{
	for (gsize i = 0; i < count; i++)
		if (!g_strcmp0(fields[i].key, key) && fields[i].length < 0)
			return fields[i].value;
	return NULL;
}

static GLogWriterOutput write_log(GLogLevelFlags level, const GLogField *fields, gsize count,
				  gpointer user_data)
{
	const char *message = field(fields, count, "MESSAGE");

	(void)user_data;
	if ((level & G_LOG_LEVEL_DEBUG) && !log_verbose)
		return G_LOG_WRITER_HANDLED;
	g_mutex_lock(&log_lock);
	if (log_stderr && (log_info_to_stderr || (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL |
									G_LOG_LEVEL_WARNING))))
		fprintf(stderr, "httphsm: %s: %s\n", level_name(level), message ? message : "");
	if (log_file) {
		g_autoptr(GDateTime) now = g_date_time_new_now_utc();
		g_autofree char *stamp = g_date_time_format(now, "%Y-%m-%dT%H:%M:%S");

		fprintf(log_file, "%s.%03dZ [%d] %s: %s\n", stamp,
			g_date_time_get_microsecond(now) / 1000, (int)getpid(), level_name(level),
			message ? message : "");
		fflush(log_file);
	}
	g_mutex_unlock(&log_lock);
	return G_LOG_WRITER_HANDLED;
}

void hsm_log_init(gboolean verbose, gboolean foreground)
{
	log_verbose = verbose;
	log_info_to_stderr = foreground;
	g_log_set_writer_func(write_log, NULL, NULL);
}

gboolean hsm_log_to_file(const char *path, GError **err)
{
	FILE *file = fopen(path, "ae");

	if (!file) {
		int code = errno;

		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(code),
			    "cannot open log file %s: %s", path, g_strerror(code));
		return FALSE;
	}
	g_mutex_lock(&log_lock);
	if (log_file)
		fclose(log_file);
	log_file = file;
	g_mutex_unlock(&log_lock);
	return TRUE;
}

void hsm_log_detach_stderr(void)
{
	g_mutex_lock(&log_lock);
	log_stderr = FALSE;
	g_mutex_unlock(&log_lock);
}

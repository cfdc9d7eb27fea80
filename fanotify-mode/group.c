/* Reading and answering a fanotify group's events: see group.h. */
#include "group.h"

#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

gboolean hsm_fan_read_events(int group,
			     void (*fn)(const struct fanotify_event_metadata *event, gpointer data),
			     gpointer data)
{
	char buf[HSM_FAN_READ_BUFFER] __attribute__((aligned(8)));
	ssize_t len = read(group, buf, sizeof(buf));
	const struct fanotify_event_metadata *event = (const void *)buf;

	if (len <= 0)
		return FALSE;
	for (; FAN_EVENT_OK(event, len); event = FAN_EVENT_NEXT(event, len)) {
		/* A newer layout could put the fd elsewhere: nothing is safe. */
		if (event->vers != FANOTIFY_METADATA_VERSION)
			g_error("fanotify metadata version %u, expected %u", event->vers,
				FANOTIFY_METADATA_VERSION);
		fn(event, data);
	}
	return TRUE;
}

gboolean hsm_fan_respond(int group, int fd, guint32 response, gboolean *downgraded)
{
	struct fanotify_response answer = { .fd = fd, .response = response };

	*downgraded = FALSE;
	if (write(group, &answer, sizeof(answer)) == sizeof(answer))
		return TRUE;
	if (errno != EINVAL || response == FAN_ALLOW || response == FAN_DENY)
		return FALSE;
	*downgraded = TRUE;
	answer.response = FAN_DENY;
	return write(group, &answer, sizeof(answer)) == sizeof(answer);
}

guint hsm_fan_answer_unclaimed(int group, guint32 response,
			       gboolean (*claimed)(int fd, gpointer data), gpointer data)
{
	struct rlimit limit;
	int top = 1 << 20; /* the kernel's default fs.nr_open */
	guint answered = 0;
	gboolean downgraded;

	if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < (rlim_t)top)
		top = (int)limit.rlim_cur;
	for (int fd = 0; fd < top; fd++)
		if (!(claimed && claimed(fd, data)) &&
		    hsm_fan_respond(group, fd, response, &downgraded))
			answered++;
	return answered;
}

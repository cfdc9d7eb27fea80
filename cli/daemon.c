/* Backgrounding with a readiness report; see daemon.h. */
#include "daemon.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

static int report_fd = -1;

/* The parent's side: relay the child's verdict. */
static G_NORETURN void wait_for_child(int fd, pid_t child)
{
	GString *report = g_string_new(NULL);
	char buf[512];
	ssize_t n;
	int status;

	while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			g_string_append_len(report, buf, n);
	if (g_str_has_prefix(report->str, "ready"))
		exit(0);
	if (g_str_has_prefix(report->str, "failed: "))
		fprintf(stderr, "httphsm: %s\n", report->str + 8);
	else if (waitpid(child, &status, 0) == child && WIFSIGNALED(status))
		fprintf(stderr, "httphsm: the daemon died during start-up (signal %d)\n",
			WTERMSIG(status));
	else
		fprintf(stderr, "httphsm: the daemon exited during start-up\n");
	exit(1);
}

void hsm_daemon_start(gboolean background)
{
	int fds[2];
	pid_t child;

	if (!background)
		return;
	if (pipe2(fds, O_CLOEXEC) < 0 || (child = fork()) < 0) {
		fprintf(stderr, "httphsm: cannot start the daemon: %s\n", g_strerror(errno));
		exit(1);
	}
	if (child > 0) {
		close(fds[1]);
		wait_for_child(fds[0], child);
	}
	close(fds[0]);
	report_fd = fds[1];
	setsid();
}

static void report(const char *text)
{
	if (report_fd < 0)
		return;
	if (write(report_fd, text, strlen(text)) < 0)
		g_debug("cannot report to the parent: %s", g_strerror(errno));
	close(report_fd);
	report_fd = -1;
}

void hsm_daemon_ready(void)
{
	int null_fd;

	/* Under systemd (Type=notify): the mount is usable now. */
	sd_notify(0, "READY=1");
	if (report_fd < 0)
		return;
	report("ready");
	hsm_log_detach_stderr();
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd >= 0) {
		dup2(null_fd, STDIN_FILENO);
		dup2(null_fd, STDOUT_FILENO);
		dup2(null_fd, STDERR_FILENO);
		close(null_fd);
	}
	if (chdir("/") < 0)
		g_debug("chdir /: %s", g_strerror(errno));
}

void hsm_daemon_failed(const char *message)
{
	g_autofree char *text = g_strconcat("failed: ", message, NULL);

	if (report_fd < 0) {
		fprintf(stderr, "httphsm: %s\n", message);
		return;
	}
	report(text);
}

void hsm_daemon_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

/* The cache directory on disk; see store.h for the layout. */
#include "store.h"
#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MTIME_XATTR "user.httphsm.mtime"
#define CONFIG_SECTION "cache"
#define FILE_SECTION "file"
#define DIR_SECTION "dir"

struct HsmStore {
	char *dir;
	char *url;
	char *tree_path;
	char *state_path;
	char *staging_path;
	int tree_fd;
	int staging_fd;         /* -1 unless this process serves the cache */
	int lock_fd;            /* -1 unless this process serves the cache */
};

void hsm_file_state_init(HsmFileState *state)
{
	memset(state, 0, sizeof(*state));
	state->last_modified = -1;
	state->changed = -1;
	hsm_range_map_init(&state->present);
}

void hsm_file_state_clear(HsmFileState *state)
{
	g_free(state->etag);
	state->etag = NULL;
	hsm_range_map_clear(&state->present);
}

gboolean hsm_file_state_has(const HsmFileState *state, guint64 offset, guint64 length)
{
	length = MIN(length, G_MAXUINT64 - offset);
	return offset >= state->size ||
	       hsm_range_map_contains(&state->present, offset, MIN(offset + length, state->size));
}

const char *hsm_store_dir(HsmStore *store)
{
	return store->dir;
}

const char *hsm_store_url(HsmStore *store)
{
	return store->url;
}

int hsm_store_staging_fd(HsmStore *store)
{
	return store->staging_fd;
}

const char *hsm_store_tree_path(HsmStore *store)
{
	return store->tree_path;
}

int hsm_store_tree_fd(HsmStore *store)
{
	return store->tree_fd;
}

char *hsm_store_default_dir(const char *url)
{
	g_autofree char *hash = g_compute_checksum_for_string(G_CHECKSUM_SHA256, url, -1);
	g_autofree char *host = g_strdup(strstr(url, "://") ? strstr(url, "://") + 3 : url);
	g_autofree char *name = NULL;

	host[strcspn(host, "/:@")] = '\0';
	name = g_strdup_printf("%s-%.12s", host, hash);
	return g_build_filename(g_get_user_cache_dir(), "httphsm", name, NULL);
}

static gboolean make_dir(const char *path, GError **err)
{
	if (g_mkdir_with_parents(path, 0755) < 0)
		return hsm_errno_error(err, errno, "cannot create", path);
	return TRUE;
}

static gboolean take_lock(HsmStore *store, GError **err)
{
	g_autofree char *path = g_build_filename(store->dir, "lock", NULL);
	char pid[32] = "";

	store->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (store->lock_fd < 0)
		return hsm_errno_error(err, errno, "cannot open", path);
	if (flock(store->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		ssize_t n = pread(store->lock_fd, pid, sizeof(pid) - 1, 0);

		pid[MAX(n, 0)] = '\0';
		g_strchomp(pid);
		g_set_error(err, HSM_ERROR, EBUSY,
			    "cache %s is in use by another httphsm daemon (pid %s)", store->dir,
			    *pid ? pid : "unknown");
		return FALSE;
	}
	g_snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(store->lock_fd, 0) < 0 || pwrite(store->lock_fd, pid, strlen(pid), 0) < 0)
		g_warning("cannot record pid in %s: %s", path, g_strerror(errno));
	return TRUE;
}

static char *read_config_url(const char *dir, GError **err)
{
	g_autofree char *path = g_build_filename(dir, "httphsm.conf", NULL);
	g_autoptr(GKeyFile) config = g_key_file_new();

	if (!g_key_file_load_from_file(config, path, G_KEY_FILE_NONE, NULL)) {
		g_set_error(err, HSM_ERROR, ENOENT, "%s is not an httphsm cache (no httphsm.conf)",
			    dir);
		return NULL;
	}
	return g_key_file_get_string(config, CONFIG_SECTION, "url", err);
}

static gboolean write_config(const char *dir, const char *url, GError **err)
{
	g_autofree char *path = g_build_filename(dir, "httphsm.conf", NULL);
	g_autoptr(GKeyFile) config = g_key_file_new();

	g_key_file_set_comment(config, NULL, NULL, " httphsm cache; see tree/ and state/", NULL);
	g_key_file_set_string(config, CONFIG_SECTION, "url", url);
	g_key_file_set_integer(config, CONFIG_SECTION, "version", 1);
	return g_key_file_save_to_file(config, path, err);
}

/* Checks that dir caches url, or makes it do so if it is new. */
static gboolean bind_url(const char *dir, const char *url, GError **err)
{
	g_autoptr(GError) read_error = NULL;
	g_autofree char *cached = read_config_url(dir, &read_error);

	if (!cached)
		return write_config(dir, url, err);
	if (strcmp(cached, url)) {
		g_set_error(err, HSM_ERROR, EEXIST,
			    "cache %s holds %s, not %s (use another --cache-dir)", dir, cached, url);
		return FALSE;
	}
	return TRUE;
}

static HsmStore *store_new(const char *dir)
{
	HsmStore *store = g_new0(HsmStore, 1);

	store->dir = g_canonicalize_filename(dir, NULL);
	store->tree_path = g_build_filename(store->dir, "tree", NULL);
	store->state_path = g_build_filename(store->dir, "state", NULL);
	store->staging_path = g_build_filename(store->dir, "staging", NULL);
	store->tree_fd = store->staging_fd = store->lock_fd = -1;
	return store;
}

/* Files a crash left half-way to their place are of no use. */
static gboolean open_staging(HsmStore *store, GError **err)
{
	g_autoptr(GDir) dir = NULL;
	const char *name;

	if (!make_dir(store->staging_path, err))
		return FALSE;
	dir = g_dir_open(store->staging_path, 0, NULL);
	while (dir && (name = g_dir_read_name(dir))) {
		g_autofree char *path = g_build_filename(store->staging_path, name, NULL);

		g_unlink(path);
	}
	store->staging_fd = open(store->staging_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (store->staging_fd < 0)
		return hsm_errno_error(err, errno, "cannot open", store->staging_path);
	return TRUE;
}

static gboolean open_tree(HsmStore *store, GError **err)
{
	store->tree_fd = open(store->tree_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (store->tree_fd < 0)
		return hsm_errno_error(err, errno, "cannot open", store->tree_path);
	return TRUE;
}

HsmStore *hsm_store_open(const char *dir, const char *url, gboolean lock, GError **err)
{
	HsmStore *store = store_new(dir);

	store->url = g_strdup(url);
	if (!make_dir(store->dir, err) || !make_dir(store->tree_path, err) ||
	    !make_dir(store->state_path, err) || (lock && !take_lock(store, err)) ||
	    !bind_url(store->dir, url, err) || !open_tree(store, err) ||
	    (lock && !open_staging(store, err))) {
		hsm_store_close(store);
		return NULL;
	}
	return store;
}

HsmStore *hsm_store_open_existing(const char *dir, GError **err)
{
	HsmStore *store = store_new(dir);

	store->url = read_config_url(store->dir, err);
	if (!store->url || !open_tree(store, err)) {
		hsm_store_close(store);
		return NULL;
	}
	return store;
}

void hsm_store_close(HsmStore *store)
{
	if (!store)
		return;
	if (store->tree_fd >= 0)
		close(store->tree_fd);
	if (store->staging_fd >= 0)
		close(store->staging_fd);
	if (store->lock_fd >= 0)
		close(store->lock_fd);
	g_free(store->dir);
	g_free(store->url);
	g_free(store->tree_path);
	g_free(store->state_path);
	g_free(store->staging_path);
	g_free(store);
}

static char *state_file(HsmStore *store, const char *relpath, gboolean create_parent)
{
	g_autofree char *hash = g_compute_checksum_for_string(G_CHECKSUM_SHA256, relpath, -1);
	char bucket[3] = { hash[0], hash[1], '\0' };
	g_autofree char *dir = g_build_filename(store->state_path, bucket, NULL);

	if (create_parent)
		g_mkdir(dir, 0755);
	return g_build_filename(dir, hash, NULL);
}

static char *escaped_path(const char *relpath)
{
	return g_uri_escape_string(relpath, "/", TRUE);
}

/* Parses a state text if it really is relpath's. */
static GKeyFile *parse_state(const char *text, gsize len, const char *relpath,
			     const char *group)
{
	g_autofree char *expected = escaped_path(relpath);
	g_autofree char *recorded = NULL;
	GKeyFile *state = g_key_file_new();

	if (!g_key_file_load_from_data(state, text, len, G_KEY_FILE_NONE, NULL) ||
	    !(recorded = g_key_file_get_string(state, group, "path", NULL)) ||
	    strcmp(recorded, expected)) {
		g_key_file_unref(state);
		return NULL;
	}
	return state;
}

/* Loads the state of relpath if it exists and really is relpath's. */
static GKeyFile *load_state(HsmStore *store, const char *relpath, const char *group)
{
	g_autofree char *path = state_file(store, relpath, FALSE);
	g_autofree char *text = NULL;
	gsize len;

	if (!g_file_get_contents(path, &text, &len, NULL))
		return NULL;
	return parse_state(text, len, relpath, group);
}

static gboolean save_state(HsmStore *store, const char *relpath, GKeyFile *state, GError **err)
{
	g_autofree char *path = state_file(store, relpath, TRUE);
	gsize len;
	g_autofree char *text = g_key_file_to_data(state, &len, NULL);

	/* g_file_set_contents() writes a temporary file, fsyncs it, renames. */
	return g_file_set_contents_full(path, text, (gssize)len,
					G_FILE_SET_CONTENTS_CONSISTENT, 0644, err);
}

gboolean hsm_file_state_parse(const char *text, gsize len, const char *relpath,
			      HsmFileState *state)
{
	g_autoptr(GKeyFile) file = parse_state(text, len, relpath, FILE_SECTION);
	g_autofree char *present = NULL;
	HsmFileState loaded;

	if (!file)
		return FALSE;
	hsm_file_state_init(&loaded);
	loaded.size = g_key_file_get_uint64(file, FILE_SECTION, "size", NULL);
	loaded.etag = g_key_file_get_string(file, FILE_SECTION, "etag", NULL);
	if (g_key_file_has_key(file, FILE_SECTION, "last-modified", NULL))
		loaded.last_modified = g_key_file_get_int64(file, FILE_SECTION, "last-modified", NULL);
	loaded.pinned = g_key_file_get_boolean(file, FILE_SECTION, "pinned", NULL);
	if (g_key_file_has_key(file, FILE_SECTION, "changed", NULL))
		loaded.changed = g_key_file_get_int64(file, FILE_SECTION, "changed", NULL);
	present = g_key_file_get_string(file, FILE_SECTION, "present", NULL);
	/* No present byte at or past size: a range wholly past it would make
	 * the total reach size and the file look complete with holes. */
	if (!present || !hsm_range_map_parse(&loaded.present, present) ||
	    hsm_range_map_next_present(&loaded.present, loaded.size) != G_MAXUINT64) {
		hsm_file_state_clear(&loaded);
		return FALSE;
	}
	hsm_file_state_clear(state);
	*state = loaded;
	return TRUE;
}

gboolean hsm_store_load_file(HsmStore *store, const char *relpath, HsmFileState *state)
{
	g_autofree char *path = state_file(store, relpath, FALSE);
	g_autofree char *text = NULL;
	gsize len;

	return g_file_get_contents(path, &text, &len, NULL) &&
	       hsm_file_state_parse(text, len, relpath, state);
}

gboolean hsm_store_save_file(HsmStore *store, const char *relpath, const HsmFileState *state,
			     GError **err)
{
	g_autoptr(GKeyFile) file = g_key_file_new();
	g_autofree char *path = escaped_path(relpath);
	g_autofree char *present = hsm_range_map_to_string(&state->present);

	g_key_file_set_string(file, FILE_SECTION, "path", path);
	g_key_file_set_uint64(file, FILE_SECTION, "size", state->size);
	if (state->etag)
		g_key_file_set_string(file, FILE_SECTION, "etag", state->etag);
	if (state->last_modified >= 0)
		g_key_file_set_int64(file, FILE_SECTION, "last-modified", state->last_modified);
	if (state->pinned)
		g_key_file_set_boolean(file, FILE_SECTION, "pinned", TRUE);
	if (state->changed >= 0)
		g_key_file_set_int64(file, FILE_SECTION, "changed", state->changed);
	g_key_file_set_string(file, FILE_SECTION, "present", present);
	return save_state(store, relpath, file, err);
}

void hsm_store_forget(HsmStore *store, const char *relpath)
{
	g_autofree char *path = state_file(store, relpath, FALSE);

	if (g_unlink(path) < 0 && errno != ENOENT)
		g_warning("cannot remove %s: %s", path, g_strerror(errno));
}

gboolean hsm_store_set_mtime(int fd, gint64 mtime)
{
	struct timespec times[2] = { { mtime, 0 }, { mtime, 0 } };
	char text[32];

	g_snprintf(text, sizeof(text), "%" G_GINT64_FORMAT, mtime);
	/* Without user xattrs (old tmpfs) mtimes cannot be repaired; still works. */
	if (fsetxattr(fd, MTIME_XATTR, text, strlen(text), 0) < 0 && errno != ENOTSUP)
		return FALSE;
	return futimens(fd, times) == 0;
}

gint64 hsm_store_get_mtime(int fd)
{
	char text[32];
	ssize_t len = fgetxattr(fd, MTIME_XATTR, text, sizeof(text) - 1);

	if (len <= 0)
		return -1;
	text[len] = '\0';
	return g_ascii_strtoll(text, NULL, 10);
}

void hsm_store_put_mtime(int fd, gint64 mtime)
{
	struct timespec times[2] = { { 0, UTIME_OMIT }, { mtime, 0 } };

	futimens(fd, times);
}

gint64 hsm_store_restore_mtime(int fd)
{
	gint64 mtime = hsm_store_get_mtime(fd);
	struct stat st;

	if (mtime >= 0 && fstat(fd, &st) == 0 && st.st_mtime != mtime)
		hsm_store_put_mtime(fd, mtime);
	return mtime;
}

void hsm_dir_state_clear(HsmDirState *state)
{
	g_free(state->etag);
	g_free(state->last_modified);
	g_free(state->digest);
	memset(state, 0, sizeof(*state));
	state->max_age = -1;
}

/* An optional string of a state file, NULL when absent or empty. */
static char *optional_string(GKeyFile *file, const char *group, const char *key)
{
	char *value = g_key_file_get_string(file, group, key, NULL);

	if (value && !*value)
		g_clear_pointer(&value, g_free);
	return value;
}

gboolean hsm_store_load_dir(HsmStore *store, const char *relpath, HsmDirState *state)
{
	g_autoptr(GKeyFile) dir = load_state(store, relpath, DIR_SECTION);
	GError *err = NULL;
	gint64 max_age;

	memset(state, 0, sizeof(*state));
	state->max_age = -1;
	if (!dir || !g_key_file_get_boolean(dir, DIR_SECTION, "populated", NULL))
		return FALSE;
	state->entries = (guint)MIN(g_key_file_get_uint64(dir, DIR_SECTION, "entries", NULL),
				    G_MAXUINT);
	state->listed = g_key_file_get_int64(dir, DIR_SECTION, "listed", NULL);
	max_age = g_key_file_get_int64(dir, DIR_SECTION, "max-age", &err);
	state->max_age = err ? -1 : CLAMP(max_age, -1, G_MAXINT32);
	g_clear_error(&err);
	state->etag = optional_string(dir, DIR_SECTION, "etag");
	state->last_modified = optional_string(dir, DIR_SECTION, "last-modified");
	state->digest = optional_string(dir, DIR_SECTION, "digest");
	return TRUE;
}

gboolean hsm_store_save_dir(HsmStore *store, const char *relpath, const HsmDirState *state,
			    GError **err)
{
	g_autoptr(GKeyFile) dir = g_key_file_new();
	g_autofree char *path = escaped_path(relpath);

	g_key_file_set_string(dir, DIR_SECTION, "path", path);
	g_key_file_set_boolean(dir, DIR_SECTION, "populated", TRUE);
	g_key_file_set_uint64(dir, DIR_SECTION, "entries", state->entries);
	g_key_file_set_int64(dir, DIR_SECTION, "listed", state->listed);
	if (state->max_age >= 0)
		g_key_file_set_int64(dir, DIR_SECTION, "max-age", state->max_age);
	/* Validators are the server's text: escaped, they stay one line. */
	if (state->etag)
		g_key_file_set_string(dir, DIR_SECTION, "etag", state->etag);
	if (state->last_modified)
		g_key_file_set_string(dir, DIR_SECTION, "last-modified", state->last_modified);
	if (state->digest)
		g_key_file_set_string(dir, DIR_SECTION, "digest", state->digest);
	return save_state(store, relpath, dir, err);
}

gboolean hsm_store_dir_is_populated(HsmStore *store, const char *relpath)
{
	g_autoptr(GKeyFile) dir = load_state(store, relpath, DIR_SECTION);

	return dir && g_key_file_get_boolean(dir, DIR_SECTION, "populated", NULL);
}

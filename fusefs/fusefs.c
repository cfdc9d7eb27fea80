/* FUSE mode: a read-only libfuse3 low-level file system over the cache tree.
 *
 * Each operation is a thin call into the core followed by the same work on
 * the cache tree that a passthrough file system does: lookup and readdir
 * first make the directory populated (hsm_tree_populate), read first makes
 * the byte range present (hsm_file_ensure) and then splices it from the
 * cache file.  Nothing here speaks HTTP or knows the cache layout.
 *
 * Limits: read-only (the mount is "ro", setattr says EROFS); no xattrs, no
 * symlinks (HTTP listings have none).  Attributes and entries are cached by
 * the kernel as long as listings are (--dir-cache-time; an hour when that
 * is forever), so that a lookup after that revalidates its directory; names
 * and files found changed are invalidated explicitly.
 */
#include "fusefs.h"
#include "error.h"
#include "url.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define FOREVER_TIMEOUT 3600.0
#define MAX_THREADS 64

/* What a FUSE inode number stands for: a path in the cache tree (the
 * kernel's lookup count keeps it). */
typedef struct {
	char *relpath;
	guint64 nlookup;            /* protected by HsmFuse.lock */
	gboolean listing_changed;   /* since the last opendir; protected by HsmFuse.lock */
} PathNode;

struct HsmFuse {
	HsmTree *tree;
	int tree_fd;
	double timeout;             /* of entries and attributes, seconds */
	struct fuse_session *session;
	PathNode root;
	GMutex lock;
	GHashTable *inodes;         /* relpath -> PathNode *; protected by lock */
	GThreadPool *invalidator;   /* kernel cache invalidations, off request threads */
	guint invalidations;        /* queued or running; protected by lock */
	GCond invalidated;          /* invalidations dropped to 0 */
};

typedef struct {
	DIR *dir;
	off_t offset;
	struct dirent *entry;
} OpenDir;

typedef struct {
	HsmFile *file;
	int fd;
} OpenFile;

static HsmFuse *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static PathNode *node_of(fuse_req_t req, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &fs_of(req)->root : (PathNode *)(uintptr_t)ino;
}

static fuse_ino_t ino_of(HsmFuse *fs, PathNode *inode)
{
	return inode == &fs->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)inode;
}

static void reply_gerror(fuse_req_t req, GError *err)
{
	int code = hsm_error_errno(err);

	g_debug("%s", err->message);
	g_error_free(err);
	fuse_reply_err(req, code);
}

static void show_read_only(struct stat *st)
{
	st->st_mode &= ~(mode_t)(S_IWUSR | S_IWGRP | S_IWOTH);
}

/* stat of the cache entry, shown read-only. */
static int stat_entry(HsmFuse *fs, const char *relpath, struct stat *st)
{
	/* AT_EMPTY_PATH: "" is the root itself. */
	if (fstatat(fs->tree_fd, relpath, st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0)
		return errno;
	show_read_only(st);
	return 0;
}

static void free_inode(gpointer data)
{
	PathNode *inode = data;

	g_free(inode->relpath);
	g_free(inode);
}

/* The inode of relpath, with one more lookup reference. */
static PathNode *lookup_inode(HsmFuse *fs, const char *relpath)
{
	PathNode *inode;

	g_mutex_lock(&fs->lock);
	inode = g_hash_table_lookup(fs->inodes, relpath);
	if (!inode) {
		inode = g_new0(PathNode, 1);
		inode->relpath = g_strdup(relpath);
		g_hash_table_insert(fs->inodes, inode->relpath, inode);
	}
	inode->nlookup++;
	g_mutex_unlock(&fs->lock);
	return inode;
}

static void forget_node(HsmFuse *fs, PathNode *inode, guint64 count)
{
	if (inode == &fs->root)
		return;
	g_mutex_lock(&fs->lock);
	g_assert(inode->nlookup >= count);
	inode->nlookup -= count;
	if (!inode->nlookup)
		g_hash_table_remove(fs->inodes, inode->relpath); /* frees it */
	g_mutex_unlock(&fs->lock);
}

/* Fills e for name in directory parent, which must be populated.  Returns
 * 0, ENOENT (e is then a cacheable negative entry) or an errno. */
static int make_entry(HsmFuse *fs, const char *parent, const char *name,
		      struct fuse_entry_param *e)
{
	g_autofree char *relpath = hsm_path_join(parent, name);
	int code;

	memset(e, 0, sizeof(*e));
	e->attr_timeout = e->entry_timeout = fs->timeout;
	code = stat_entry(fs, relpath, &e->attr);
	if (code)
		return code;
	e->ino = ino_of(fs, lookup_inode(fs, relpath));
	return 0;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* The kernel must not drop cached pages because the mtime looks new. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	HsmFuse *fs = fs_of(req);
	PathNode *dir = node_of(req, parent);
	struct fuse_entry_param e;
	GError *err = NULL;
	int code;

	if (!hsm_tree_populate(fs->tree, dir->relpath, &err)) {
		reply_gerror(req, err);
		return;
	}
	code = make_entry(fs, dir->relpath, name, &e);
	if (code && code != ENOENT)
		fuse_reply_err(req, code);
	else /* ENOENT too: a negative entry the kernel may cache */
		fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_node(fs_of(req), node_of(req, ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		forget_node(fs_of(req), node_of(req, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

/* fstat of an open file, shown read-only. */
static int stat_open_file(const OpenFile *open_file, struct stat *st)
{
	if (fstat(open_file->fd, st) < 0)
		return errno;
	show_read_only(st);
	return 0;
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	/* The kernel passes the open file of a read (regular files only):
	 * its holder keeps it after its path went away or was replaced. */
	int code = fi ? stat_open_file((OpenFile *)(uintptr_t)fi->fh, &st)
		      : stat_entry(fs_of(req), node_of(req, ino)->relpath, &st);

	if (code)
		fuse_reply_err(req, code);
	else
		fuse_reply_attr(req, &st, fs_of(req)->timeout);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)ino, (void)attr, (void)to_set, (void)fi;
	fuse_reply_err(req, EROFS);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	HsmFuse *fs = fs_of(req);
	PathNode *inode = node_of(req, ino);
	GError *err = NULL;
	OpenDir *d;
	int fd;

	if (!hsm_tree_populate(fs->tree, inode->relpath, &err)) {
		reply_gerror(req, err);
		return;
	}
	fd = openat(fs->tree_fd, *inode->relpath ? inode->relpath : ".",
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	d = g_new0(OpenDir, 1);
	d->dir = fdopendir(fd);
	if (!d->dir) {
		int code = errno;

		close(fd);
		g_free(d);
		fuse_reply_err(req, code);
		return;
	}
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = 1;
	/* The kernel's cached entries go if the listing changed since. */
	g_mutex_lock(&fs->lock);
	fi->keep_cache = !inode->listing_changed;
	inode->listing_changed = FALSE;
	g_mutex_unlock(&fs->lock);
	fuse_reply_open(req, fi);
}

/* One readdir reply, as passthrough_ll does it: telldir offsets, and with
 * "plus" a lookup reference for every entry handed out. */
static void read_directory(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
			   struct fuse_file_info *fi, gboolean plus)
{
	HsmFuse *fs = fs_of(req);
	PathNode *dir = node_of(req, ino);
	OpenDir *d = (OpenDir *)(uintptr_t)fi->fh;
	g_autofree char *buf = g_malloc(size);
	size_t used = 0;

	if (offset != d->offset) {
		seekdir(d->dir, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		struct fuse_entry_param e = { .attr.st_ino = 0 };
		size_t len;

		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dir);
			/* An error is not the end of the directory: say so, unless
			 * this reply already carries entries (the next one will). */
			if (!d->entry && errno && !used) {
				fuse_reply_err(req, errno);
				return;
			}
			if (!d->entry)
				break;
		}
		if (plus && strcmp(d->entry->d_name, ".") && strcmp(d->entry->d_name, "..")) {
			if (make_entry(fs, dir->relpath, d->entry->d_name, &e)) {
				d->entry = NULL; /* vanished meanwhile */
				continue;
			}
		} else {
			e.attr.st_ino = d->entry->d_ino;
			e.attr.st_mode = (mode_t)d->entry->d_type << 12;
		}
		len = plus ? fuse_add_direntry_plus(req, buf + used, size - used,
						    d->entry->d_name, &e, telldir(d->dir))
			   : fuse_add_direntry(req, buf + used, size - used, d->entry->d_name,
					       &e.attr, telldir(d->dir));
		if (len > size - used) {
			if (e.ino)
				forget_node(fs, (PathNode *)(uintptr_t)e.ino, 1);
			break;
		}
		used += len;
		d->offset = telldir(d->dir);
		d->entry = NULL;
	}
	fuse_reply_buf(req, buf, used);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
		       struct fuse_file_info *fi)
{
	read_directory(req, ino, size, offset, fi, FALSE);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
			   struct fuse_file_info *fi)
{
	read_directory(req, ino, size, offset, fi, TRUE);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	OpenDir *d = (OpenDir *)(uintptr_t)fi->fh;

	(void)ino;
	closedir(d->dir);
	g_free(d);
	fuse_reply_err(req, 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	HsmFuse *fs = fs_of(req);
	PathNode *inode = node_of(req, ino);
	GError *err = NULL;
	OpenFile *open_file;
	HsmFile *file;
	int fd;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	file = hsm_tree_get_file(fs->tree, inode->relpath, &err);
	if (!file) {
		reply_gerror(req, err);
		return;
	}
	fd = openat(fs->tree_fd, inode->relpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		hsm_file_unref(file);
		return;
	}
	open_file = g_new(OpenFile, 1);
	open_file->file = file;
	open_file->fd = fd;
	fi->fh = (uintptr_t)open_file;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* The kernel interrupts a read whose reader got a signal (killed, or ^C):
 * it stops waiting for the bytes, so the reader goes away at once. */
static void on_interrupt(fuse_req_t req, void *data)
{
	(void)req;
	g_atomic_int_set((gint *)data, 1);
}

typedef struct {
	gint interrupted;        /* atomic */
	pid_t pid;
} ReadRequest;

/* Interrupted, or its process is gone: the kernel's readahead reads are
 * not interrupted when their reader is killed. */
static gboolean request_gone(gpointer data)
{
	ReadRequest *request = data;

	return g_atomic_int_get(&request->interrupted) ||
	       (request->pid > 0 && hsm_process_gone(GINT_TO_POINTER(request->pid)));
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
		    struct fuse_file_info *fi)
{
	OpenFile *open_file = (OpenFile *)(uintptr_t)fi->fh;
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	GError *err = NULL;
	ReadRequest request = { 0, fuse_req_ctx(req)->pid };
	HsmReader reader = { request_gone, &request };
	gboolean ok;

	(void)ino;
	fuse_req_interrupt_func(req, on_interrupt, &request.interrupted);
	ok = hsm_file_ensure(open_file->file, (guint64)offset, size, &reader, &err);
	fuse_req_interrupt_func(req, NULL, NULL);
	if (!ok) {
		reply_gerror(req, err);
		return;
	}
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = open_file->fd;
	buf.buf[0].pos = offset;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	OpenFile *open_file = (OpenFile *)(uintptr_t)fi->fh;

	(void)ino;
	close(open_file->fd);
	hsm_file_unref(open_file->file);
	g_free(open_file);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st;

	(void)ino;
	if (fstatvfs(fs_of(req)->tree_fd, &st) < 0) { /* O_PATH will do */
		fuse_reply_err(req, errno);
		return;
	}
	st.f_flag |= ST_RDONLY;
	fuse_reply_statfs(req, &st);
}

static const struct fuse_lowlevel_ops operations = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.statfs = op_statfs,
};

/* The inode number of relpath if the kernel knows it, else 0; under
 * fs->lock. */
static fuse_ino_t known_ino(HsmFuse *fs, const char *relpath)
{
	PathNode *inode = *relpath ? g_hash_table_lookup(fs->inodes, relpath) : &fs->root;

	return inode ? ino_of(fs, inode) : 0;
}

/* The kernel's cached pages, attributes and dentry of a changed path go,
 * from a thread of our own: the reader that found the change may still
 * hold those pages locked, and a lookup that revalidated the listing holds
 * the directory's lock. */
static void invalidate(gpointer data, gpointer user_data)
{
	HsmFuse *fs = user_data;
	char *relpath = data;
	g_autofree char *parent = g_path_get_dirname(relpath);
	const char *name = strrchr(relpath, '/') ? strrchr(relpath, '/') + 1 : relpath;
	fuse_ino_t ino, parent_ino;

	g_mutex_lock(&fs->lock);
	ino = known_ino(fs, relpath);
	parent_ino = *relpath ? known_ino(fs, strcmp(parent, ".") ? parent : "") : 0;
	g_mutex_unlock(&fs->lock);
	/* Either may be forgotten meanwhile: the kernel then answers ENOENT. */
	if (ino)
		fuse_lowlevel_notify_inval_inode(fs->session, ino, 0, 0);
	if (parent_ino)
		fuse_lowlevel_notify_inval_entry(fs->session, parent_ino, name, strlen(name));
	g_free(relpath);
	g_mutex_lock(&fs->lock);
	if (--fs->invalidations == 0)
		g_cond_broadcast(&fs->invalidated);
	g_mutex_unlock(&fs->lock);
}

static void on_changed(gpointer user_data, const char *relpath)
{
	HsmFuse *fs = user_data;
	PathNode *inode;

	g_mutex_lock(&fs->lock);
	inode = *relpath ? g_hash_table_lookup(fs->inodes, relpath) : &fs->root;
	if (inode)
		inode->listing_changed = TRUE;
	fs->invalidations++;
	g_mutex_unlock(&fs->lock);
	g_thread_pool_push(fs->invalidator, g_strdup(relpath), NULL);
}

/* Never called from a request thread (it could wait for itself). */
static void on_flush(gpointer user_data)
{
	HsmFuse *fs = user_data;

	g_mutex_lock(&fs->lock);
	while (fs->invalidations)
		g_cond_wait(&fs->invalidated, &fs->lock);
	g_mutex_unlock(&fs->lock);
}

static struct fuse_args mount_args(const char *url, const char *fuse_options, gboolean debug)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	g_autofree char *fsname = g_strdup_printf("-ofsname=%s,subtype=httphsm,ro", url);

	fuse_opt_add_arg(&args, "httphsm");
	fuse_opt_add_arg(&args, fsname);
	if (fuse_options && *fuse_options) {
		fuse_opt_add_arg(&args, "-o");
		fuse_opt_add_arg(&args, fuse_options);
	}
	if (debug)
		fuse_opt_add_arg(&args, "-d");
	return args;
}

HsmFuse *hsm_fuse_mount(HsmTree *tree, const char *mountpoint, const char *fuse_options,
			gboolean debug, GError **err)
{
	HsmFuse *fs = g_new0(HsmFuse, 1);
	struct fuse_args args = mount_args(hsm_tree_url(tree), fuse_options, debug);

	fs->tree = tree;
	fs->tree_fd = hsm_tree_root_fd(tree);
	fs->timeout = hsm_tree_dir_cache_time(tree) < 0
			      ? FOREVER_TIMEOUT
			      : (double)hsm_tree_dir_cache_time(tree) / G_USEC_PER_SEC;
	fs->root.relpath = g_strdup("");
	g_mutex_init(&fs->lock);
	g_cond_init(&fs->invalidated);
	fs->inodes = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, free_inode);
	fs->invalidator = g_thread_pool_new(invalidate, fs, 1, FALSE, NULL);
	fs->session = fuse_session_new(&args, &operations, sizeof(operations), fs);
	fuse_opt_free_args(&args);
	if (!fs->session) {
		g_set_error(err, HSM_ERROR, EINVAL, "invalid FUSE options '%s'",
			    fuse_options ? fuse_options : "");
		hsm_fuse_free(fs);
		return NULL;
	}
	if (fuse_set_signal_handlers(fs->session) < 0 ||
	    fuse_session_mount(fs->session, mountpoint) < 0) {
		g_set_error(err, HSM_ERROR, EIO, "cannot mount on %s (see the messages above)",
			    mountpoint);
		hsm_fuse_free(fs);
		return NULL;
	}
	hsm_tree_set_hooks(tree, &(HsmFileHooks){ .changed = on_changed,
						  .flush = on_flush,
						  .user_data = fs });
	return fs;
}

int hsm_fuse_serve(HsmFuse *fs)
{
	struct fuse_loop_config *config = fuse_loop_cfg_create();
	int rc;

	fuse_loop_cfg_set_max_threads(config, MAX_THREADS);
	fuse_loop_cfg_set_clone_fd(config, 0);
	rc = fuse_session_loop_mt(fs->session, config);
	fuse_loop_cfg_destroy(config);
	return rc;
}

void hsm_fuse_free(HsmFuse *fs)
{
	if (!fs)
		return;
	hsm_tree_set_hooks(fs->tree, NULL);
	g_thread_pool_free(fs->invalidator, TRUE, TRUE);
	if (fs->session) {
		fuse_session_unmount(fs->session);
		fuse_remove_signal_handlers(fs->session);
		fuse_session_destroy(fs->session);
	}
	g_hash_table_unref(fs->inodes);
	g_cond_clear(&fs->invalidated);
	g_mutex_clear(&fs->lock);
	g_free(fs->root.relpath);
	g_free(fs);
}

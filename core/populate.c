/* Turning a remote listing into cache tree entries.
 *
 * One GET of the index page, HEADs (in parallel) only for files whose listed
 * size is rounded or whose mtime is not shown, then the cache directory is
 * made to match: new files are created complete (size, mtime) before they
 * get their name, so no reader ever sees a half-made entry; entries whose
 * size or mtime changed lose their cached data, a new version renamed over
 * the old one (whose holders keep it); vanished entries go.
 *
 * A listing seen before is asked for again conditionally (its ETag or
 * Last-Modified); a 304, or the same bytes from a server that sends no
 * validators, leaves the cache untouched.
 */
#include "error.h"
#include "listing.h"
#include "populate.h"
#include "url.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An errno error about relpath's entry name (NULL: relpath itself). */
static gboolean entry_error(GError **err, int code, const char *what, const char *relpath,
			    const char *name)
{
	g_autofree char *path = name ? hsm_path_join(relpath, name) : g_strdup(relpath);

	return hsm_errno_error(err, code, what, *path ? path : "/");
}

/* What the store will say of this listing: when, and how to ask again. */
static void describe_listing(const HsmPage *page, const char *digest, HsmDirState *listed)
{
	listed->listed = g_get_real_time() / G_USEC_PER_SEC;
	listed->max_age = page->max_age;
	listed->etag = g_strdup(page->validators.etag);
	listed->last_modified = g_strdup(page->validators.last_modified);
	listed->digest = g_strdup(digest);
}

/* A listing parsed as its page arrives: the parse takes as long as a fast
 * link takes to bring the page (25 ms for 5,000 entries), so on a slow one
 * it is over soon after the last byte. */
typedef struct {
	HsmListingParser *parser;
	gsize fed;
} ListingStream;

static void listing_begin(gpointer data, const char *url, const char *charset)
{
	ListingStream *stream = data;

	hsm_listing_parser_abandon(stream->parser);
	stream->parser = hsm_listing_parser_new(url, charset);
	stream->fed = 0;
}

static void listing_piece(gpointer data, const void *bytes, gsize len)
{
	ListingStream *stream = data;

	hsm_listing_parser_feed(stream->parser, bytes, len);
	stream->fed += len;
}

/* The listing of the page, from the stream's parser if it saw all of it. */
static HsmListing *finish_listing(ListingStream *stream, const HsmPage *page)
{
	HsmListingParser *parser = g_steal_pointer(&stream->parser);

	if (parser && stream->fed == page->body->len)
		return hsm_listing_parser_finish(parser);
	hsm_listing_parser_abandon(parser);
	return hsm_listing_parse((const char *)page->body->data, page->body->len, page->url,
				 page->charset);
}

/* GETs the listing of relpath; *unchanged (and NULL) when known says it is
 * the listing the cache already shows. */
static HsmListing *fetch_listing(const HsmPopulator *pop, const char *relpath,
				 const HsmDirState *known, HsmDirState *listed,
				 gboolean *unchanged, GError **err)
{
	g_autofree char *url = hsm_url_for_path(hsm_store_url(pop->store), relpath, TRUE);
	HsmValidators if_changed = { known ? known->etag : NULL,
				     known ? known->last_modified : NULL };
	g_autofree char *digest = NULL;
	ListingStream parsed = { NULL, 0 };
	HsmPageStream stream = { listing_begin, listing_piece, &parsed };
	HsmPage page;
	HsmListing *listing = NULL;

	*unchanged = FALSE;
	if (!hsm_fetch_page(pop->fetcher, url, pop->max_listing,
			    if_changed.etag || if_changed.last_modified ? &if_changed : NULL, &stream,
			    &page, err)) {
		hsm_listing_parser_abandon(parsed.parser);
		return NULL;
	}
	if (page.not_modified) {
		describe_listing(&page, known->digest, listed);
		/* A 304 may leave out validators that did not change. */
		if (!listed->etag)
			listed->etag = g_strdup(known->etag);
		if (!listed->last_modified)
			listed->last_modified = g_strdup(known->last_modified);
		*unchanged = TRUE;
	} else if (!page.is_html) {
		g_set_error(err, HSM_ERROR, ENOTDIR, "%s is not a directory listing (not HTML)",
			    page.url);
	} else {
		digest = g_compute_checksum_for_data(G_CHECKSUM_SHA256, page.body->data,
						     page.body->len);
		describe_listing(&page, digest, listed);
		if (known && known->digest && !strcmp(known->digest, digest))
			*unchanged = TRUE;
		else
			listing = finish_listing(&parsed, &page);
	}
	hsm_listing_parser_abandon(parsed.parser);
	hsm_page_clear(&page);
	return listing;
}

/* Gets exact sizes and mtimes with HEAD where the page had none.  Files
 * that vanished since the listing are dropped from it. */
static gboolean complete_with_heads(const HsmPopulator *pop, const char *relpath, HsmListing *listing,
				    GError **err)
{
	GPtrArray *entries = listing->entries;
	g_autofree HsmHeadJob *jobs = g_new0(HsmHeadJob, entries->len);
	g_autofree guint *index = g_new(guint, entries->len);
	guint count = 0;
	gboolean ok = TRUE;

	for (guint i = 0; i < entries->len; i++) {
		HsmListingEntry *entry = entries->pdata[i];
		g_autofree char *path = NULL;

		if (!hsm_listing_entry_needs_head(entry))
			continue;
		path = hsm_path_join(relpath, entry->name);
		jobs[count].url = hsm_url_for_path(hsm_store_url(pop->store), path, FALSE);
		index[count++] = i;
	}
	if (count)
		hsm_fetch_heads(pop->fetcher, jobs, count);
	for (guint j = count; j-- > 0;) {
		HsmListingEntry *entry = entries->pdata[index[j]];
		HsmHeadJob *job = &jobs[j];

		if (job->error && g_error_matches(job->error, HSM_ERROR, ENOENT)) {
			g_ptr_array_remove_index(entries, index[j]);
		} else if (job->error) {
			if (ok)
				g_propagate_error(err, g_steal_pointer(&job->error));
			ok = FALSE;
		} else if (job->info.size == G_MAXUINT64) {
			g_warning("%s: the server tells no size; leaving it out", job->url);
			g_ptr_array_remove_index(entries, index[j]);
		} else {
			entry->size = job->info.size;
			entry->size_exact = TRUE;
			if (job->info.mtime >= 0)
				entry->mtime = job->info.mtime;
		}
		g_clear_error(&job->error);
		hsm_remote_info_clear(&job->info);
		g_free(job->url);
	}
	return ok;
}

static gint64 entry_mtime(const HsmListingEntry *entry)
{
	return MAX(entry->mtime, 0);
}

static gboolean set_dir_mtime(int dirfd, const char *name, const HsmListingEntry *entry)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	gboolean ok = fd >= 0 && hsm_store_set_mtime(fd, entry_mtime(entry));

	if (fd >= 0)
		close(fd);
	return ok;
}

/* An unnamed sparse file in dirfd's file system with the entry's size and
 * mtime, or -1 with errno set. */
static int make_unnamed_file(int dirfd, const HsmListingEntry *entry)
{
	int fd, saved_errno;

	if (entry->size > G_MAXINT64) {
		errno = EFBIG;
		return -1;
	}
	fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)entry->size) == 0 && hsm_store_set_mtime(fd, entry_mtime(entry)))
		return fd;
	saved_errno = errno;
	close(fd);
	errno = saved_errno;
	return -1;
}

/* Names an unnamed file (without CAP_DAC_READ_SEARCH, through /proc). */
static gboolean link_unnamed(int fd, int dirfd, const char *name)
{
	char proc_path[64];

	if (linkat(fd, "", dirfd, name, AT_EMPTY_PATH) == 0)
		return TRUE;
	g_snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc_path, dirfd, name, AT_SYMLINK_FOLLOW) == 0;
}

/* Creates a complete sparse file and only then links it under its name. */
static gboolean create_file(int dirfd, const HsmListingEntry *entry)
{
	int fd = make_unnamed_file(dirfd, entry), saved_errno;
	gboolean ok;

	if (fd < 0)
		return FALSE;
	ok = link_unnamed(fd, dirfd, entry->name);
	saved_errno = errno;
	close(fd);
	errno = saved_errno;
	return ok;
}

/* The remote mtime of an existing cache entry. */
static gint64 cached_mtime(int dirfd, const char *name, const struct stat *st)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	gint64 mtime = fd >= 0 ? hsm_store_get_mtime(fd) : -1;

	if (fd >= 0)
		close(fd);
	return mtime >= 0 ? mtime : st->st_mtime;
}

static gboolean remove_entry(const HsmPopulator *pop, int dirfd, const char *parent, const char *name);

static gboolean empty_directory(const HsmPopulator *pop, int fd, const char *relpath)
{
	DIR *dir = fdopendir(fd);
	struct dirent *d;
	gboolean ok = TRUE;

	if (!dir) {
		close(fd);
		return FALSE;
	}
	while ((d = readdir(dir)))
		if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
			ok = remove_entry(pop, dirfd(dir), relpath, d->d_name) && ok;
	closedir(dir);
	return ok;
}

/* Removes a cache entry (recursively), its saved state and what the owner
 * remembers of it; state first, so that no state outlives its data. */
static gboolean remove_entry(const HsmPopulator *pop, int dirfd, const char *parent, const char *name)
{
	g_autofree char *relpath = hsm_path_join(parent, name);
	int fd;

	hsm_store_forget(pop->store, relpath);
	pop->forget(pop->data, relpath);
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return TRUE;
	if (errno != EISDIR && errno != EPERM)
		return FALSE;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !empty_directory(pop, fd, relpath))
		return FALSE;
	return unlinkat(dirfd, name, AT_REMOVEDIR) == 0;
}

/* Records that relpath changed now: HTTP caches on the way may still hold
 * the old version, and its first fetches ask them to revalidate (file.c). */
static void note_change(HsmStore *store, const char *relpath, guint64 size)
{
	HsmFileState state;
	GError *err = NULL;

	hsm_file_state_init(&state);
	state.size = size;
	state.changed = g_get_real_time() / G_USEC_PER_SEC;
	if (!hsm_store_save_file(store, relpath, &state, &err)) {
		g_warning("%s", err->message);
		g_error_free(err);
	}
	hsm_file_state_clear(&state);
}

/* A new version of a file takes the old one's place in one rename: made
 * complete in the staging directory, then renamed over the old name, so
 * that a reader opening the name finds one version or the other, never
 * nothing; one holding the old version open keeps it.  Its state and what
 * the owner remembers go first, as when an entry is removed. */
static gboolean replace_file(const HsmPopulator *pop, int dirfd, const char *parent,
			     const HsmListingEntry *entry)
{
	static gint counter;
	g_autofree char *relpath = hsm_path_join(parent, entry->name);
	int staging = hsm_store_staging_fd(pop->store);
	int fd = make_unnamed_file(dirfd, entry), saved_errno;
	char name[64];
	gboolean ok;

	if (fd < 0)
		return FALSE;
	g_snprintf(name, sizeof(name), "%d-%d", (int)getpid(), g_atomic_int_add(&counter, 1));
	ok = link_unnamed(fd, staging, name);
	saved_errno = errno;
	close(fd);
	if (!ok) {
		errno = saved_errno;
		return FALSE;
	}
	hsm_store_forget(pop->store, relpath);
	note_change(pop->store, relpath, entry->size);
	pop->forget(pop->data, relpath);
	if (renameat(staging, name, dirfd, entry->name) == 0)
		return TRUE;
	saved_errno = errno;
	unlinkat(staging, name, 0);
	errno = saved_errno;
	return FALSE;
}

/* Creates a listed entry the cache directory does not have.  Returns
 * FALSE with errno set. */
static gboolean create_entry(int dirfd, const HsmListingEntry *entry)
{
	if (entry->type == HSM_ENTRY_DIR)
		return mkdirat(dirfd, entry->name, 0755) == 0 &&
		       set_dir_mtime(dirfd, entry->name, entry);
	return create_file(dirfd, entry);
}

/* Makes an entry the cache directory has match the listing; *replaced when
 * it had to be made anew.  Returns FALSE with errno set. */
static gboolean reconcile_entry(const HsmPopulator *pop, int dirfd, const char *relpath,
				const HsmListingEntry *entry, gboolean *replaced)
{
	gboolean want_dir = entry->type == HSM_ENTRY_DIR;
	struct stat st;

	*replaced = FALSE;
	if (fstatat(dirfd, entry->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (want_dir && S_ISDIR(st.st_mode))
			return set_dir_mtime(dirfd, entry->name, entry);
		if (!want_dir && S_ISREG(st.st_mode) && (guint64)st.st_size == entry->size &&
		    cached_mtime(dirfd, entry->name, &st) == entry_mtime(entry))
			return TRUE;
		*replaced = TRUE;
		if (!want_dir && S_ISREG(st.st_mode) && hsm_store_staging_fd(pop->store) >= 0)
			return replace_file(pop, dirfd, relpath, entry);
		/* Another type: drop what we had. */
		if (!remove_entry(pop, dirfd, relpath, entry->name))
			return FALSE;
	} else if (errno != ENOENT) {
		return FALSE;
	}
	return create_entry(dirfd, entry);
}

static int compare_name_to_entry(const void *name, const void *entry)
{
	return strcmp(name, (*(HsmListingEntry *const *)entry)->name);
}

static gboolean is_listed(HsmListing *listing, const char *name)
{
	return bsearch(name, listing->entries->pdata, listing->entries->len, sizeof(gpointer),
		       compare_name_to_entry) != NULL;
}

/* Removes the cached entries that the server no longer lists, adding their
 * names to gone; returns the names of those it still lists (none, for a
 * directory listed the first time: its entries are then created without
 * looking for old ones). */
static GHashTable *remove_vanished(const HsmPopulator *pop, int dirfd, const char *relpath,
				   HsmListing *listing, GPtrArray *gone)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	GHashTable *kept = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	struct dirent *d;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return kept;
	}
	while ((d = readdir(dir))) {
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if (is_listed(listing, d->d_name))
			g_hash_table_add(kept, g_strdup(d->d_name));
		else
			g_ptr_array_add(gone, g_strdup(d->d_name));
	}
	closedir(dir);
	for (guint i = 0; i < gone->len; i++) {
		g_autofree char *path = hsm_path_join(relpath, gone->pdata[i]);

		g_message("%s: no longer on the server; removing it from the cache", path);
		if (!remove_entry(pop, dirfd, relpath, gone->pdata[i]))
			g_warning("cannot remove %s: %s", path, g_strerror(errno));
	}
	return kept;
}

static void warn_too_big(const char *relpath, const HsmListingEntry *entry)
{
	g_autofree char *path = hsm_path_join(relpath, entry->name);

	g_warning("%s: listed size %" G_GUINT64_FORMAT
		  " is more than the cache can hold; leaving it out",
		  path, entry->size);
}

/* New entries are created by a few threads: a complete file is several
 * system calls, and only the final link takes the directory's lock. */
#define MAX_CREATORS 4
#define ENTRIES_PER_CREATOR 2048

typedef struct {
	int dirfd;
	const char *relpath;
	GPtrArray *entries;      /* to create */
	guint first, step;       /* this creator's share: first, first + step... */
	int error;               /* errno of its first failure, or 0 */
	const HsmListingEntry *failed;
} Creator;

static gpointer create_entries(gpointer data)
{
	Creator *c = data;

	for (guint i = c->first; i < c->entries->len; i += c->step) {
		const HsmListingEntry *entry = c->entries->pdata[i];

		if (create_entry(c->dirfd, entry))
			continue;
		/* One entry the cache file system cannot hold (a size past its
		 * limit) costs that entry, not the directory. */
		if (errno == EFBIG) {
			warn_too_big(c->relpath, entry);
			continue;
		}
		c->error = errno;
		c->failed = entry;
		break;
	}
	return NULL;
}

static gboolean create_new_entries(int dirfd, const char *relpath, GPtrArray *entries,
				   GError **err)
{
	guint count = CLAMP(entries->len / ENTRIES_PER_CREATOR, 1,
			    MIN(g_get_num_processors(), MAX_CREATORS));
	Creator creators[MAX_CREATORS];
	GThread *threads[MAX_CREATORS];

	for (guint i = 0; i < count; i++) {
		creators[i] = (Creator){ dirfd, relpath, entries, i, count, 0, NULL };
		threads[i] = i ? g_thread_new("hsm-populate", create_entries, &creators[i]) : NULL;
	}
	create_entries(&creators[0]);
	for (guint i = 1; i < count; i++)
		g_thread_join(threads[i]);
	for (guint i = 0; i < count; i++)
		if (creators[i].error)
			return entry_error(err, creators[i].error, "cannot create cache entry",
					   relpath, creators[i].failed->name);
	return TRUE;
}

/* Tells the owner which names of relpath changed, then relpath itself. */
static void report_changes(const HsmPopulator *pop, const char *relpath, GPtrArray *names)
{
	if (!pop->changed || !names->len)
		return;
	for (guint i = 0; i < names->len; i++) {
		g_autofree char *path = hsm_path_join(relpath, names->pdata[i]);

		pop->changed(pop->data, path);
	}
	pop->changed(pop->data, relpath);
}

/* Makes the cache directory match listing; the names that changed go to
 * changed (when revalidating: the first time, every name is new). */
static gboolean apply_listing(const HsmPopulator *pop, const char *relpath, HsmListing *listing,
			      GPtrArray *changed, GError **err)
{
	g_autoptr(GHashTable) kept = NULL;
	g_autoptr(GPtrArray) fresh = g_ptr_array_new();
	int dirfd = openat(hsm_store_tree_fd(pop->store), *relpath ? relpath : ".",
			   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	gboolean ok = FALSE;

	if (dirfd < 0)
		return entry_error(err, errno, "cannot open cache directory", relpath, NULL);
	kept = remove_vanished(pop, dirfd, relpath, listing, changed);
	for (guint i = 0; i < listing->entries->len; i++) {
		const HsmListingEntry *entry = listing->entries->pdata[i];
		gboolean replaced;

		if (!g_hash_table_contains(kept, entry->name)) {
			g_ptr_array_add(fresh, (gpointer)entry);
			g_ptr_array_add(changed, g_strdup(entry->name));
		} else if (reconcile_entry(pop, dirfd, relpath, entry, &replaced)) {
			if (replaced)
				g_ptr_array_add(changed, g_strdup(entry->name));
		} else if (errno == EFBIG) {
			warn_too_big(relpath, entry);
		} else {
			entry_error(err, errno, "cannot update cache entry", relpath, entry->name);
			goto out;
		}
	}
	if (!create_new_entries(dirfd, relpath, fresh, err))
		goto out;
	hsm_store_restore_mtime(dirfd); /* creating entries bumped it */
	ok = TRUE;
out:
	close(dirfd);
	return ok;
}

gboolean hsm_populate_dir(const HsmPopulator *pop, const char *relpath, const HsmDirState *known,
			  HsmDirState *listed, GError **err)
{
	g_autoptr(GPtrArray) changed = g_ptr_array_new_with_free_func(g_free);
	gboolean unchanged;
	HsmListing *listing;
	gboolean ok = FALSE;

	memset(listed, 0, sizeof(*listed));
	listed->max_age = -1;
	listing = fetch_listing(pop, relpath, known, listed, &unchanged, err);
	if (unchanged) {
		g_debug("%s/: listing unchanged", relpath);
		listed->entries = known->entries;
		return hsm_store_save_dir(pop->store, relpath, listed, err);
	}
	if (!listing)
		goto out;
	/* An error page served with 200 parses as an empty listing. */
	if (known && known->entries && !listing->entries->len) {
		g_set_error(err, HSM_ERROR, EPROTO,
			    "%s/: the server's page lists no entries where it listed %u",
			    relpath, known->entries);
		goto out;
	}
	g_debug("listed %s/: %u entries; completing sizes", relpath, listing->entries->len);
	if (!complete_with_heads(pop, relpath, listing, err))
		goto out;
	g_debug("%s/: sizes complete; creating entries", relpath);
	if (!apply_listing(pop, relpath, listing, changed, err))
		goto out;
	listed->entries = listing->entries->len;
	ok = hsm_store_save_dir(pop->store, relpath, listed, err);
	g_debug("listed %s/: %u entries, %u changed", relpath, listing->entries->len,
		known ? changed->len : 0);
	if (known)
		report_changes(pop, relpath, changed);
out:
	hsm_listing_free(listing);
	return ok;
}

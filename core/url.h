/* URLs of the remote tree and the names of its entries.
 *
 * A path inside the tree ("relpath") is a sequence of raw entry names joined
 * by '/', without a leading slash; "" is the root.  Names are bytes as the
 * server decoded them, never containing '/' or NUL.
 */
#ifndef HSM_URL_H
#define HSM_URL_H

#include <glib.h>

/* Checks a user-supplied tree URL (http or https) and returns it with a
 * trailing '/', or NULL with err set. */
char *hsm_url_normalize_base(const char *url, GError **err);

/* Percent-encodes every byte of name outside RFC 3986's unreserved set. */
char *hsm_url_escape_segment(const char *name);

/* Decodes %XX escapes of len bytes of text ('%' not followed by two hex
 * digits stays literal; '+' is not a space in a path).  *out_len receives
 * the decoded length, which may include NUL bytes. */
char *hsm_url_unescape(const char *text, gsize len, gsize *out_len);

/* The URL of relpath under base (base ends with '/'); directories get a
 * trailing '/'. */
char *hsm_url_for_path(const char *base, const char *relpath, gboolean is_dir);

/* TRUE when name (len bytes) can be an entry name: not empty, not "." or
 * "..", no '/' or NUL, at most NAME_MAX bytes. */
gboolean hsm_name_is_safe(const char *name, gsize len);

/* relpath of name inside dir ("" is the root). */
char *hsm_path_join(const char *dir, const char *name);

/* When path is top or inside it, what follows top and its '/' ("" for top
 * itself, a pointer into path); else NULL.  top may end in '/' (e.g. "/"). */
const char *hsm_path_below(const char *path, const char *top);

#endif

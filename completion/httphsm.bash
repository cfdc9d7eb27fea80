# bash completion for httphsm(1).
# Verbs, each verb's long options (as their --help texts list them), the -o NAME= forms of
# mount, httphsm mount points (from /proc/self/mounts) for umount, status and refresh, and
# directories for the mount point argument of mount.

# Mount points of httphsm mounts, from /proc/self/mounts: those of type fuse.httphsm, and
# the bind mounts of fanotify mode (whose type is the cache's file system), known by the
# daemons' registry (/run/httphsm/mounts, $XDG_RUNTIME_DIR/httphsm/mounts: key files
# with a mountpoint= line).
_httphsm_mounts()
{
	local mnt type rest line IFS=$' \t\n'
	local -A registered=()
	for line in $(cat /run/httphsm/mounts/* ${XDG_RUNTIME_DIR:+"$XDG_RUNTIME_DIR"/httphsm/mounts/*} \
		2>/dev/null | sed -n 's/^mountpoint=//p' | sed 's/ /\\040/g'); do
		registered[$line]=1
	done
	while read -r _ mnt type rest; do
		if [[ $type == fuse.httphsm || -n ${registered[$mnt]-} ]]; then
			printf '%s\n' "${mnt//\\040/ }"
		fi
	done </proc/self/mounts
}

_httphsm()
{
	local cur prev words cword
	_init_completion -s || return

	local verbs="mount umount status prefetch evict unpin refresh"
	local mount_opts="--mode --cache-dir --foreground --options --user --netrc --proxy
		--proxy-user --cacert --insecure --user-agent --max-connections --retries --timeout
		--min-rate --min-window --max-window --cache-max-size --cache-max-age
		--dir-cache-time --populate --restarts --mmap --log-file --verbose --debug-fuse --help"

	if ((cword == 1)); then
		COMPREPLY=($(compgen -W "$verbs --help --version" -- "$cur"))
		return
	fi

	local verb=${words[1]} opts
	case $verb in
	mount)
		case $prev in
		-m | --mode)
			COMPREPLY=($(compgen -W "fuse fanotify" -- "$cur"))
			return
			;;
		--populate)
			COMPREPLY=($(compgen -W "lazy eager" -- "$cur"))
			return
			;;
		--mmap)
			COMPREPLY=($(compgen -W "lazy whole" -- "$cur"))
			return
			;;
		-c | --cache-dir)
			_filedir -d
			return
			;;
		--cacert | --log-file)
			_filedir
			return
			;;
		-o | --options)
			# NAME=VALUE forms of the long options, FUSE's and mount(8)'s own.
			local o names="ro rw allow_other default_permissions defaults _netdev nofail
				noauto x-systemd.automount"
			for o in $mount_opts; do
				case $o in
				--foreground | --options | --help) ;;
				--netrc | --insecure | --verbose | --debug-fuse) names+=" ${o#--}" ;;
				*) names+=" ${o#--}=" ;;
				esac
			done
			local prefix=""
			[[ $cur == *,* ]] && prefix=${cur%,*},
			COMPREPLY=($(compgen -P "$prefix" -W "$names" -- "${cur##*,}"))
			[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
			return
			;;
		-u | --user | --proxy | --proxy-user | --user-agent | --max-connections | \
			--retries | --timeout | --min-rate | --min-window | --max-window | \
			--cache-max-size | --cache-max-age | --dir-cache-time)
			return
			;;
		esac
		$split && return
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$mount_opts" -- "$cur"))
			[[ ${COMPREPLY-} == *= ]] && compopt -o nospace
			return
		fi
		# URL first (nothing to offer), then the mount point: a directory.
		local i args=0
		for ((i = 2; i < cword; i++)); do
			case ${words[i]} in
			-m | --mode | -c | --cache-dir | -o | --options | -u | --user | --proxy | \
				--proxy-user | --cacert | --user-agent | --max-connections | --retries | \
				--timeout | --min-rate | --min-window | --max-window | --cache-max-size | \
				--cache-max-age | --dir-cache-time | --populate | --log-file)
				((i++))
				;;
			-*) ;;
			*) ((args++)) ;;
			esac
		done
		((args == 1)) && _filedir -d
		return
		;;
	umount)
		opts="--help"
		;;
	status | evict)
		opts="--bytes --help"
		;;
	prefetch)
		opts="--pin --recursive --help"
		;;
	unpin)
		opts="--help"
		;;
	refresh)
		opts="--recursive --help"
		;;
	*)
		return
		;;
	esac

	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	local IFS=$'\n'
	case $verb in
	umount)
		COMPREPLY=($(compgen -W "$(_httphsm_mounts)" -- "$cur"))
		;;
	refresh)
		COMPREPLY=($(compgen -W "$(_httphsm_mounts)" -- "$cur"))
		_filedir -d
		;;
	*)
		COMPREPLY=($(compgen -W "$(_httphsm_mounts)" -- "$cur"))
		_filedir
		;;
	esac
} &&
	complete -F _httphsm httphsm

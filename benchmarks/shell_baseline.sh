#!/usr/bin/env bash
# The shell-style baseline: fm's ownership answer computed the way firstmate's
# bin/fm-teardown.sh computed its own (its record reads, liveness and attribution checks):
# a grep per key per record (fm_meta_get), `cd -P` per path, and tmux and ps calls per
# window (fm_backend_agent_state), for every record a decision looks at.
#
#   shell_baseline.sh one TASK          -> one line: task, verdict, exit code, live owners
#   shell_baseline.sh audit [--sample K] -> one such line per task (K evenly spaced tasks)
#
# The old script had no audit: an operator ran its per-task check for every task, so the
# audit here is that loop (every decision re-reads every other record). It reads the same
# environment as fm (FM_HOME, FM_STATE_OVERRIDE, FM_TMUX_SOCKET, FM_TREEHOUSE_BIN).
#
# It computes the rules the benchmark fleets exercise, in fm's order: records sharing a slot,
# endpoint liveness, the pool lease (jq on the pool's state file, as the lease variant read
# `treehouse status --json`), the launch order, a tmux server in the slot (one lsof cwd scan,
# as the LATER reap scanned cwds) and rule 5 (git status and git log, as the old landed-work
# check). It leaves out what the old script never did and the fleets never contain (invalid
# neighbour records, unattributed agents, slot claims, squash-merge checks): a lower bound on
# what a shell implementation of the whole contract would cost.
set -u
export LC_ALL=C

STATE=${FM_STATE_OVERRIDE:-${FM_HOME:-$PWD}/state}
FMHOME=${FM_HOME:-$PWD}
SCAFFOLD_RE='^\?\? (\.claude/|\.fm-(grok|kimi)-turnend$)'

tmx() { tmux -S "$FM_TMUX_SOCKET" "$@"; }

# fm_meta_get: one process per key per record; the last matching line wins.
meta_get() {
    local v
    v=$(grep -e "^$2=" -- "$1" 2>/dev/null) || { REPLY=""; return 0; }
    v=${v##*$'\n'}
    REPLY=${v#*=}
}

# Canonical path with cd -P (one subshell per path); a missing path: parent resolved + name.
canon() {
    if [ -d "$1" ]; then
        REPLY=$(cd -P -- "$1" && pwd -P)
    else
        local parent
        parent=$(cd -P -- "${1%/*}" 2>/dev/null && pwd -P) && REPLY="$parent/${1##*/}" || REPLY=$1
    fi
}

# fm_backend_tmux_classify_process_name, into KIND (no subshell).
classify() {
    local n=${1##*/}
    n=${n#-}
    case $n in
    *claude* | *codex* | *opencode* | *gemini* | *aider* | *grok* | *kimi* | cursor-agent* | \
        pi | pi-signed | pi-launcher | Pi | muse | muse-bin-* | goose | amp | qwen) KIND=agent ;;
    zsh | bash | sh | dash | ash | ksh | mksh | tcsh | csh | fish) KIND=shell ;;
    *) KIND=other ;;
    esac
}

# fm_backend_agent_state for tmux (spec §3.3), into EP; the pane tty's pids into EP_PIDS[task].
declare -A EP_CACHE=() EP_PIDS=()
agent_state() {
    local tid=$1 target=$2
    if [ -n "${EP_CACHE[$tid]:-}" ]; then
        EP=${EP_CACHE[$tid]}
        return
    fi
    local session=${target%%:*} win=${target#*:} out tty rows pid pgid tpgid comm
    local agent=0 other=0 fg="" all="" cmd
    EP=unreadable
    if ! out=$(tmx list-windows -t "=$session" -F '#{window_name}' 2>&1); then
        case $out in
        *"can't find session"* | *"no server running"* | *"No such file or directory"* | \
            *"Connection refused"*) EP=missing ;;
        esac
    elif ! grep -qxF -e "$win" <<<"$out"; then
        EP=missing
    elif tty=$(tmx display-message -p -t "=$session:=$win" '#{pane_tty}' 2>/dev/null); then
        rows=$(ps -t "$tty" -o pid=,pgid=,tpgid=,comm= 2>/dev/null)
        while read -r pid pgid tpgid comm; do
            [ -n "${pid:-}" ] || continue
            all+=" $pid"
            [ "$pgid" = "$tpgid" ] || continue
            fg+="${fg:+,}$pid"
            classify "$comm"
            case $KIND in agent) agent=1 ;; other) other=1 ;; esac
        done <<<"$rows"
        if [ $agent = 0 ] && [ -n "$fg" ]; then
            while read -r cmd _; do
                classify "$cmd"
                [ "$KIND" = agent ] && agent=1
            done < <(ps -o args= -p "$fg" 2>/dev/null)
        fi
        if [ $agent = 1 ]; then
            EP=alive
        elif cmd=$(tmx display-message -p -t "=$session:=$win" '#{pane_current_command}' 2>/dev/null); then
            classify "$cmd"
            if [ "$KIND" = agent ]; then
                EP=alive
            elif [ -n "$fg" ]; then
                [ $other = 0 ] && EP=dead || EP=ambiguous
            elif [ -n "$cmd" ]; then
                [ "$KIND" = shell ] && EP=dead || EP=ambiguous
            fi
        fi
    fi
    EP_CACHE[$tid]=$EP
    EP_PIDS[$tid]=$all
}

is_live() { [ "$1" != dead ] && [ "$1" != missing ]; }

# One answer line; the exit code of the last answer is kept for `one` (as fm exits with it).
LAST_EXIT=0
emit() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}"
    LAST_EXIT=$3
}

# One task's decision, the old script's way: every other record is read again.
decide_task() {
    local tid=$1 meta=$STATE/$1.meta k n
    if [ ! -f "$meta" ] || [ -L "$meta" ]; then
        emit "$tid" invalid 2
        return
    fi
    for k in window worktree project; do # identity keys exactly once
        n=$(grep -c -e "^$k=" -- "$meta")
        [ "$n" = 1 ] || {
            emit "$tid" unsafe 5
            return
        }
    done
    meta_get "$meta" window && local window=$REPLY
    meta_get "$meta" worktree && local wt=$REPLY
    meta_get "$meta" project && local proj=$REPLY
    meta_get "$meta" tasktmp && local tmp=$REPLY
    meta_get "$meta" kind && local kind=${REPLY:-ship}
    meta_get "$meta" spawn_gen && local gen=$REPLY
    meta_get "$meta" treehouse_lease && local my_lease=$REPLY
    meta_get "$meta" treehouse_lease_holder && local my_holder=$REPLY
    canon "$wt" && local slot=$REPLY
    canon "$proj" && local cproj=$REPLY

    if [ -n "$tmp" ] && { [ -L "$tmp" ] || { [ -e "$tmp" ] && [ ! -d "$tmp" ]; }; }; then
        emit "$tid" unsafe 5
        return
    fi
    local root
    for root in "$cproj" / "${HOME:-}" "$FMHOME"; do # the slot is a root or its ancestor
        [ -n "$root" ] || continue
        case "$root/" in "${slot%/}/"*)
            emit "$tid" unsafe 5
            return
            ;;
        esac
    done

    # The exclusive-record scan (spec §7.2): every other record's worktree, canonicalised.
    local others=() f oid
    for f in "$STATE"/*.meta; do
        oid=${f##*/}
        oid=${oid%.meta}
        [ "$oid" = "$tid" ] && continue
        meta_get "$f" worktree
        canon "$REPLY"
        [ "$REPLY" = "$slot" ] && others+=("$oid")
    done

    # The pool's lease on the slot (one jq per decision).
    local leased="" lid="" holder="" entry
    entry=$(jq -r --arg p "$slot" \
        '.worktrees[]? | select(.path == $p) | "\(.leased // false)\t\(.lease_id // "")\t\(.lease_holder // "")"' \
        "${slot%/*/*}/treehouse-state.json" 2>/dev/null)
    [ -n "$entry" ] && IFS=$'\t' read -r leased lid holder <<<"$entry"
    local mine=0 lease_task=""
    if [ "$leased" = true ]; then
        if [ -n "$my_lease" ]; then
            [ "$lid" = "$my_lease" ] && mine=1
        elif [ -n "$holder" ] && { [ "$holder" = "$my_holder" ] || [ "$holder" = "$tid" ]; }; then
            mine=1
        fi
        [ $mine = 0 ] && [ -n "$holder" ] && [ -f "$STATE/$holder.meta" ] && lease_task=$holder
    fi

    # Rule 3: live owners (claimants by their endpoint, a foreign lease always).
    local live=() o
    for o in "${others[@]}"; do
        meta_get "$STATE/$o.meta" window
        agent_state "$o" "$REPLY"
        is_live "$EP" && live+=("$o")
    done
    if [ "$leased" = true ] && [ $mine = 0 ]; then
        if [ -n "$lease_task" ]; then
            if [[ " ${others[*]} " != *" $lease_task "* ]]; then
                meta_get "$STATE/$lease_task.meta" window
                agent_state "$lease_task" "$REPLY"
                is_live "$EP" && live+=("$lease_task")
                others+=("$lease_task")
            fi
        else
            live+=("lease:${holder:-$lid}")
        fi
    fi
    if [ ${#live[@]} -gt 0 ]; then
        emit "$tid" live-owner 4 "$(
            IFS=,
            echo "${live[*]}"
        )"
        return
    fi

    # Rule 4: other claimants, none live: the lease, then the launch order.
    if [ ${#others[@]} -gt 0 ] && [ $mine = 0 ]; then
        local newest=$tid newest_gen=${gen#s} e
        newest_gen=${newest_gen%%.*}
        [ -n "$lease_task" ] && newest=$lease_task
        if [ -z "$lease_task" ]; then
            for o in "${others[@]}"; do
                meta_get "$STATE/$o.meta" spawn_gen
                e=${REPLY#s}
                e=${e%%.*}
                if [ "$e" = "$newest_gen" ]; then
                    newest=""
                    break
                fi
                [ "$e" -gt "$newest_gen" ] && newest=$o newest_gen=$e
            done
        fi
        if [ "$newest" != "$tid" ]; then
            emit "$tid" stale 0
            return
        fi
    fi

    [ -d "$slot" ] || {
        emit "$tid" proceed 0
        return
    }
    # The pool must manage the slot; its .git must be its own worktree's (spec §7a).
    if [ -z "$entry" ] || [ ! -x "${FM_TREEHOUSE_BIN:-/nonexistent}" ] || [ ! -f "$slot/.git" ]; then
        emit "$tid" unsafe 5
        return
    fi
    # The return would end every process in the slot: a tmux server there would take the
    # whole fleet with it (spec §7a; as in fm, another task's dead shell there does not block).
    if [ "$leased" = true ] || [ -z "$my_lease$my_holder" ]; then
        local line
        while read -r line; do
            case $line in n*) case "${line#n}/" in "$slot/"*)
                emit "$tid" unsafe 5
                return
                ;;
            esac ;;
            esac
        done < <(lsof -w -a -c tmux -d cwd -Fpn 2>/dev/null)
    fi

    # Rule 5: the old landed-work check (spec §5): status, then commits on no remote.
    if [ "$kind" = ship ]; then
        local dirty unpushed
        if ! dirty=$(git -C "$slot" status --porcelain 2>/dev/null) ||
            ! unpushed=$(git -C "$slot" log --oneline HEAD --not --remotes -- 2>/dev/null); then
            emit "$tid" unlanded 3
            return
        fi
        dirty=$(grep -Ev -e "$SCAFFOLD_RE" <<<"$dirty")
        if [ -n "$dirty" ] || [ -n "$unpushed" ]; then
            emit "$tid" unlanded 3
            return
        fi
    fi
    emit "$tid" proceed 0
}

main() {
    case ${1:-} in
    one)
        decide_task "$2"
        return "$LAST_EXIT"
        ;;
    audit)
        local ids=() f
        for f in "$STATE"/*.meta; do
            f=${f##*/}
            ids+=("${f%.meta}")
        done
        local n=${#ids[@]} k i
        k=$n
        [ "${2:-}" = --sample ] && k=$3
        for ((i = 0; i < k && i < n; i++)); do
            # Sampled runs take evenly spaced tasks, so the sample has the fleet's mix.
            decide_task "${ids[$((i * n / k))]}"
        done
        ;;
    *)
        echo "usage: $0 one TASK | audit [--sample K]" >&2
        return 2
        ;;
    esac
}

main "$@"

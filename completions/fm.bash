# bash completion for fm (spec §11).
#
# Subcommands, options and runbook names are static; task ids come from listing
# <state dir>/*.meta right here, in the shell: no Python, no `fm` process. Two answers ask fm:
# the value of --discard-live-owner (`fm __complete owners [--state-dir DIR] TASK`) and the
# task of `fm restore` (`fm __complete saves [--state-dir DIR]`: the tasks that have saves).
#
# Install: source this file, or copy it to
# ${XDG_DATA_HOME:-~/.local/share}/bash-completion/completions/fm (`fm --install-completion bash`).

# The runbooks of `fm runbook NAME` (the same list as fm_teardown.commands.completion.RUNBOOKS).
_fm_runbooks=(live-owner stale-slot unlanded unsafe failed invalid git-lock mass-cleanup plan-changed agents)

# _fm_line: the command line as whole shell words. bash splits COMP_WORDS at every character of
# COMP_WORDBREAKS (`=`, `:`, `@` ...), so `--discard-live-owner=lease:ci` arrives in five
# pieces; the pieces that touch in COMP_LINE are glued back. Sets, in the caller's scope:
# _fm_words (every word of the line), _fm_cword (the index of the word at the cursor) and
# _fm_cur (that word, up to the cursor).
_fm_line() {
    local line=$COMP_LINE i n=${#COMP_WORDS[@]} w rest lead off=0 j=-1 prev="" start=()
    _fm_words=() _fm_cword=0 _fm_cur=""
    for ((i = 0; i < n; i++)); do
        w=${COMP_WORDS[i]}
        if ((i == COMP_CWORD)) && [[ -z $w ]]; then
            # The empty word at the cursor: part of the previous word when no space separates
            # them (`--discard-live-owner=`), else a word of its own.
            if ((j >= 0 && COMP_POINT > 0)) && [[ ${line:COMP_POINT-1:1} != [[:space:]] ]]; then
                _fm_cword=$j
            else
                ((++j))
                _fm_words[j]="" start[j]=$COMP_POINT _fm_cword=$j
            fi
            prev=""
            continue
        fi
        rest=${line:off}
        lead=${rest%%[![:space:]]*}
        if ((j >= 0)) && [[ -z $lead && -n $prev ]]; then
            _fm_words[j]+=$w
        else
            ((++j))
            _fm_words[j]=$w start[j]=$((off + ${#lead}))
        fi
        off=$((off + ${#lead} + ${#w}))
        prev=$w
        ((i == COMP_CWORD)) && _fm_cword=$j
    done
    local s=${start[_fm_cword]:-$COMP_POINT}
    if ((COMP_POINT >= s)); then
        _fm_cur=${line:s:COMP_POINT-s}
    else
        _fm_cur=${_fm_words[_fm_cword]}
    fi
}

# _fm_unquote WORD: WORD as the shell would pass it (quotes removed, a leading ~/ expanded).
_fm_unquote() {
    local w=$1
    if [[ $w == \'*\' && ${#w} -ge 2 ]]; then
        w=${w:1:${#w}-2}
    elif [[ $w == \"*\" && ${#w} -ge 2 ]]; then
        w=${w:1:${#w}-2}
    else
        w=${w//\\/}
    fi
    [[ $w == "~" || $w == "~/"* ]] && w=$HOME${w:1}
    REPLY=$w
}

# _fm_reply CANDIDATE...: those that extend the word at the cursor, as readline wants them:
# without the part of the word up to its last COMP_WORDBREAKS character (`=`, `:`, `@`).
_fm_reply() {
    local brk="" c pre="" x
    for c in = : @; do
        [[ $COMP_WORDBREAKS == *"$c"* ]] && brk+=$c
    done
    [[ -n $brk && $_fm_cur == *[$brk]* ]] && pre=${_fm_cur%"${_fm_cur##*[$brk]}"}
    for x in "$@"; do
        [[ $x == "$_fm_cur"* ]] && COMPREPLY+=("${x#"$pre"}")
    done
}

# _fm_ids: the task ids of the state dir (the line's --state-dir, else $FM_STATE_OVERRIDE,
# else ${FM_HOME:-${FM_ROOT_OVERRIDE:-$PWD}}/state), without those already on the line.
_fm_ids() {
    local dir f id typed=" ${_fm_pos[*]} " o restore=""
    if [[ -n $_fm_sd ]]; then
        _fm_unquote "$_fm_sd"
        dir=$REPLY
    elif [[ -n ${FM_STATE_OVERRIDE-} ]]; then
        dir=$FM_STATE_OVERRIDE
    else
        dir=${FM_HOME:-${FM_ROOT_OVERRIDE:-$PWD}}/state
    fi
    [[ -d $dir ]] || return 0
    # The glob must not be the user's: no match is nothing, not an error or the pattern itself.
    for o in nullglob failglob nocaseglob dotglob; do
        if shopt -q "$o"; then restore+="shopt -s $o;"; else restore+="shopt -u $o;"; fi
    done
    shopt -s nullglob
    shopt -u failglob nocaseglob dotglob
    for f in "$dir"/*.meta; do
        id=${f##*/}
        id=${id%.meta}
        # A task id: [A-Za-z0-9._-], not starting with `.`, at most 64 characters (globs, not
        # a regex: bash compiles a regex anew at each test).
        [[ $id == "$_fm_cur"* && $typed != *" $id "* && $id != *[!A-Za-z0-9._-]* &&
            $id != .* && -n $id && ${#id} -le 64 ]] && COMPREPLY+=("$id")
    done
    eval "$restore"
}

# _fm_dirs VALUE: directory names for an option's value.
_fm_dirs() {
    compopt -o filenames 2>/dev/null
    local IFS=$'\n'
    _fm_unquote "$1"
    # shellcheck disable=SC2207
    COMPREPLY=($(compgen -d -- "$REPLY"))
}

# _fm_owners PREFIX: the live owners of the first TASK's slot, from `fm __complete owners`.
_fm_owners() {
    local task=${_fm_pos[0]-} args=() line owners=()
    [[ -n $task ]] || return 0
    if [[ -n $_fm_sd ]]; then
        _fm_unquote "$_fm_sd"
        args=(--state-dir "$REPLY")
    fi
    while IFS= read -r line; do
        [[ -n $line ]] && owners+=("$1$line")
    done < <(command fm __complete owners "${args[@]}" "$task" 2>/dev/null)
    _fm_reply "${owners[@]}"
}

# _fm_saves: the tasks `fm restore` has saves of, from `fm __complete saves`.
_fm_saves() {
    local args=() line saves=()
    if [[ -n $_fm_sd ]]; then
        _fm_unquote "$_fm_sd"
        args=(--state-dir "$REPLY")
    fi
    while IFS= read -r line; do
        [[ -n $line ]] && saves+=("$line")
    done < <(command fm __complete saves "${args[@]}" 2>/dev/null)
    _fm_reply "${saves[@]}"
}

_fm() {
    local _fm_words _fm_cword _fm_cur _fm_sd="" _fm_pos=() REPLY
    COMPREPLY=()
    _fm_line
    local cur=$_fm_cur i w cmd="" cmdi=0 opts valued expect="" dd=0 curopt="" prev

    # The command: the first word after `fm` that is no root option (or a root option's SHELL).
    for ((i = 1; i < _fm_cword; i++)); do
        w=${_fm_words[i]}
        case $w in
        --install-completion | --show-completion)
            [[ ${_fm_words[i + 1]-} == @(bash|zsh|fish) ]] && ((i + 1 < _fm_cword)) && ((i++))
            ;;
        -*) ;;
        *)
            cmd=$w cmdi=$i
            break
            ;;
        esac
    done
    if [[ -z $cmd ]]; then
        prev=${_fm_words[_fm_cword - 1]-}
        if [[ $cur != -* && ($prev == --install-completion || $prev == --show-completion) ]]; then
            _fm_reply bash zsh fish
        elif [[ $cur == -* ]]; then
            _fm_reply --help --version --install-completion --show-completion
        else
            _fm_reply teardown runbook restore demo
        fi
        return 0
    fi

    case $cmd in
    teardown)
        opts="--dry-run --force --discard-live-owner --json --state-dir --expect-plan --no-journal --landed --include-live --include-pushed --min-age --help"
        valued=" --discard-live-owner --state-dir --min-age --expect-plan "
        ;;
    restore)
        opts="--to --ref --project --json --state-dir --help"
        valued=" --to --ref --project --state-dir "
        ;;
    runbook) opts="--help" valued=" " ;;
    demo) opts="--keep --help" valued=" " ;;
    *) return 0 ;;
    esac

    # The words after the command, the cursor's excepted (those after it count too): the
    # state dir (the last --state-dir wins), the positional words, and whether the cursor's
    # word is the value of an option given in the word before it.
    for ((i = cmdi + 1; i < ${#_fm_words[@]}; i++)); do
        w=${_fm_words[i]}
        if ((i == _fm_cword)); then
            curopt=$expect expect=""
            continue
        fi
        if [[ -n $expect ]]; then
            [[ $expect == --state-dir ]] && _fm_sd=$w
            expect=""
            continue
        fi
        if ((dd)); then
            _fm_pos+=("$w")
            continue
        fi
        case $w in
        --) dd=1 ;;
        --state-dir=*) _fm_sd=${w#*=} ;;
        -*=*) ;;
        -*) [[ $valued == *" $w "* ]] && expect=$w ;;
        *) _fm_pos+=("$w") ;;
        esac
    done

    local value=$cur eq=""
    if [[ -z $curopt && $dd == 0 && $cur == --*=* ]]; then
        curopt=${cur%%=*} value=${cur#*=} eq="$curopt="
        [[ $valued == *" $curopt "* ]] || return 0
    fi
    case $curopt in
    --discard-live-owner)
        _fm_owners "$eq"
        return 0
        ;;
    --state-dir | --to | --project)
        _fm_dirs "$value"
        return 0
        ;;
    ?*) return 0 ;; # --ref, --min-age, --expect-plan: no static answer
    esac

    if [[ $cur == -* ]] && ((!dd)); then
        # shellcheck disable=SC2086
        _fm_reply $opts
        return 0
    fi
    case $cmd in
    teardown) _fm_ids ;;
    restore) ((${#_fm_pos[@]})) || _fm_saves ;;
    runbook) ((${#_fm_pos[@]})) || _fm_reply "${_fm_runbooks[@]}" ;;
    esac
    return 0
}

complete -F _fm fm

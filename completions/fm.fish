# fish completion for fm (spec §11).
#
# Subcommands, options and runbook names are static; task ids come from listing
# <state dir>/*.meta right here, in the shell: no Python, no `fm` process. Two answers ask fm,
# once per Tab: the value of --discard-live-owner (`fm __complete owners [--state-dir DIR]
# TASK`) and the task of `fm restore` (`fm __complete saves [--state-dir DIR]`: the tasks that
# have saves).
#
# Install: copy to ${XDG_CONFIG_HOME:-~/.config}/fish/completions/fm.fish
# (`fm --install-completion fish`), or `source` it.

# The runbooks of `fm runbook NAME` (the same list as fm_teardown.commands.completion.RUNBOOKS).
set -g __fm_runbooks live-owner stale-slot unlanded unsafe failed invalid git-lock mass-cleanup plan-changed agents

# The command: the first word after `fm` that is no root option (or a root option's SHELL).
function __fm_command
    set -l tokens (commandline -opc)
    set -l skip 0
    for w in $tokens[2..-1]
        if test $skip = 1
            set skip 0
            contains -- $w bash zsh fish; and continue
        end
        switch $w
            case --install-completion --show-completion
                set skip 1
            case '-*'
            case '*'
                echo $w
                return 0
        end
    end
    return 1
end

function __fm_no_command
    not __fm_command >/dev/null
end

function __fm_wants_command
    __fm_no_command; and not __fm_after --install-completion --show-completion
end

function __fm_using -a name
    set -l command (__fm_command)
    test "$command" = "$name"
end

# Whether the word at the cursor follows one of these options (it is their value).
function __fm_after
    set -l tokens (commandline -opc)
    test (count $tokens) -ge 2; and contains -- $tokens[-1] $argv
end

# __fm_scan: from the words between the command and the cursor, set __fm_sd to the line's
# --state-dir (the last one wins) and __fm_pos to the positional words. (fish hands a
# completion only the line up to the cursor: words after it are not seen.)
function __fm_scan
    set -g __fm_sd
    set -g __fm_pos
    set -l valued --discard-live-owner --state-dir --to --ref --project --min-age --expect-plan
    set -l expect
    set -l dd 0
    set -l seen_command 0
    for w in (commandline -opc)[2..-1]
        if test $seen_command = 0
            string match -q -- '-*' $w; or set seen_command 1
            continue
        end
        if test -n "$expect"
            test "$expect" = --state-dir; and set -g __fm_sd $w
            set expect
            continue
        end
        if test $dd = 1
            set -ga __fm_pos $w
            continue
        end
        switch $w
            case --
                set dd 1
            case '--state-dir=*'
                set -g __fm_sd (string replace -- --state-dir= '' $w)
            case '-*=*'
            case '-*'
                contains -- $w $valued; and set expect $w
            case '*'
                set -ga __fm_pos $w
        end
    end
    string match -q -- '~' $__fm_sd; and set -g __fm_sd $HOME
    string match -q -- '~/*' $__fm_sd; and set -g __fm_sd $HOME(string sub -s 2 -- $__fm_sd)
end

# Whether no positional word is on the line yet (restore and runbook take one).
function __fm_first_word
    __fm_scan
    not set -q __fm_pos[1]
end

# The task ids of the state dir (the line's --state-dir, else $FM_STATE_OVERRIDE, else
# ${FM_HOME:-${FM_ROOT_OVERRIDE:-$PWD}}/state), without those already on the line.
function __fm_task_ids
    __fm_scan
    set -l dir
    if test -n "$__fm_sd"
        set dir $__fm_sd
    else if set -q FM_STATE_OVERRIDE[1]; and test -n "$FM_STATE_OVERRIDE"
        set dir $FM_STATE_OVERRIDE
    else if set -q FM_HOME[1]; and test -n "$FM_HOME"
        set dir $FM_HOME/state
    else if set -q FM_ROOT_OVERRIDE[1]; and test -n "$FM_ROOT_OVERRIDE"
        set dir $FM_ROOT_OVERRIDE/state
    else
        set dir $PWD/state
    end
    test -d "$dir"; or return 0
    for id in (string replace -rf -- '^.*/([A-Za-z0-9_-][A-Za-z0-9._-]{0,63})\.meta$' '$1' $dir/*.meta)
        contains -- $id $__fm_pos; or echo $id
    end
end

# The live owners of the first TASK's slot: `fm __complete owners`, one call.
function __fm_owners
    __fm_scan
    set -q __fm_pos[1]; or return 0
    set -l args
    test -n "$__fm_sd"; and set args --state-dir $__fm_sd
    command fm __complete owners $args $__fm_pos[1] 2>/dev/null | string replace -r -- '$' \t'live owner'
end

# The tasks `fm restore` has saves of: `fm __complete saves`, one call.
function __fm_saves
    # fish asks for the words of the TASK position while an option is typed too: no call then.
    string match -q -- '-*' (commandline -ct); and return 0
    __fm_scan
    set -l args
    test -n "$__fm_sd"; and set args --state-dir $__fm_sd
    command fm __complete saves $args 2>/dev/null
end

complete -c fm -e
complete -c fm -f

# fm
complete -c fm -n __fm_wants_command -a teardown -d 'Tear down a finished task'
complete -c fm -n __fm_wants_command -a runbook -d 'List the runbooks, or print one'
complete -c fm -n __fm_wants_command -a restore -d 'List or restore saved work'
complete -c fm -n __fm_wants_command -a demo -d 'Run the demo'
complete -c fm -n __fm_no_command -l help -d 'Show help and exit'
complete -c fm -n __fm_no_command -l version -d 'Print the version and exit'
complete -c fm -n __fm_no_command -l install-completion -d 'Install completion for the shell'
complete -c fm -n __fm_no_command -l show-completion -d 'Print the completion script'
complete -c fm -n '__fm_no_command; and __fm_after --install-completion --show-completion' \
    -a 'bash zsh fish'

# fm teardown
complete -c fm -n '__fm_using teardown; and not __fm_after --discard-live-owner --state-dir --min-age --expect-plan' \
    -a '(__fm_task_ids)' -d 'task'
complete -c fm -n '__fm_using teardown' -l dry-run -d 'Print the verdict and the plan; change nothing'
complete -c fm -n '__fm_using teardown' -l force -d "Also discard THIS task's unlanded work"
complete -c fm -n '__fm_using teardown' -l discard-live-owner -x -a '(__fm_owners)' \
    -d 'With --force: proceed although this live owner owns the slot'
complete -c fm -n '__fm_using teardown' -l json -d 'One JSON object on stdout'
complete -c fm -n '__fm_using teardown' -l state-dir -x -a '(__fish_complete_directories)' \
    -d 'Task records directory'
complete -c fm -n '__fm_using teardown' -l expect-plan -x \
    -d 'Refuse unless the plan is this dry run token ([TASK=]TOKEN)'
complete -c fm -n '__fm_using teardown' -l no-journal -d 'Run although the journal cannot be written'
complete -c fm -n '__fm_using teardown' -l landed -d 'Tear down every finished task'
complete -c fm -n '__fm_using teardown' -l include-live -d 'With --landed: also tasks whose endpoint is alive'
complete -c fm -n '__fm_using teardown' -l include-pushed -d 'With --landed: also tasks pushed, not merged'
complete -c fm -n '__fm_using teardown' -l min-age -x -d 'With --landed: launched at least this long ago'
complete -c fm -n '__fm_using teardown' -l help -d 'Show help and exit'

# fm restore
complete -c fm -n '__fm_using restore; and not __fm_after --to --ref --project --state-dir; and __fm_first_word' \
    -a '(__fm_saves)' -d 'saved task'
complete -c fm -n '__fm_using restore' -l to -x -a '(__fish_complete_directories)' \
    -d 'Add a worktree at DIR on the save'
complete -c fm -n '__fm_using restore' -l ref -x -d 'The save to restore (default: the newest)'
complete -c fm -n '__fm_using restore' -l project -x -a '(__fish_complete_directories)' \
    -d 'The project repository'
complete -c fm -n '__fm_using restore' -l json -d 'One JSON object on stdout'
complete -c fm -n '__fm_using restore' -l state-dir -x -a '(__fish_complete_directories)' \
    -d 'Task records directory'
complete -c fm -n '__fm_using restore' -l help -d 'Show help and exit'

# fm runbook
complete -c fm -n '__fm_using runbook; and __fm_first_word' \
    -a "$__fm_runbooks" -d runbook
complete -c fm -n '__fm_using runbook' -l help -d 'Show help and exit'

# fm demo
complete -c fm -n '__fm_using demo' -l keep -d 'Keep the demo fleet afterwards'
complete -c fm -n '__fm_using demo' -l help -d 'Show help and exit'

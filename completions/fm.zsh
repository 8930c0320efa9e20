#compdef fm

_fm_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _FM_COMPLETE=complete_zsh fm)
}

compdef _fm_completion fm

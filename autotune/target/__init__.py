"""Where the server runs: here (the default), or inside a target reached by ssh and/or an exec prefix."""

"""`pitcrew demo`: the whole loop on the embedded default (see `bot.app.demo.runner`)."""

"""The daemon's configuration: one YAML file plus the environment, validated once.

Why this exists: `pitcrew run`, `pitcrew approve` and the other commands must
agree on where the store is, who may approve what and how cards are timed,
and a mistake in the file must be found before 3 a.m. Every section is a
closed pydantic model (unknown keys are errors), the policy sections reuse the
core's own models (`CorrelationConfig`, `NotifyConfig`, `ApprovalPolicy`), and
every problem is reported at once as `file:line: field: reason`. Durations
may be written `30s`, `10m`, `1h30m` or as seconds. Tokens never come from the
file: only from `SLACK_BOT_TOKEN`, `SLACK_APP_TOKEN`, `SLACK_SIGNING_SECRET`,
`PITCREW_INGEST_TOKEN` (what /ingest asks of clients beyond loopback) or the
files that `*_FILE` variables name; they are `SecretStr` and `render`
masks them. With no file at all every setting has a working default (console
chat, `./pitcrew.db`, loopback HTTP on port 9464).

The package's modules: `base` (the closed section model), `sections` (the root
`Settings` and the small sections), `actions`, `sources`, `election` (one module per
large area), `loading` (`load`, `render`). Import each name from the module that holds
it: `from bot.app.settings.loading import load`, `from bot.app.settings.sections import
Settings`.
"""

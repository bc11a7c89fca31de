"""Hostile strings of every family, for the tests of each medium text reaches (Slack
mrkdwn, HTML, a terminal): what a log line, an object's name or an error message may
carry, and what must never come out of it on the other side."""

from __future__ import annotations

from html.parser import HTMLParser

from bot.core.model import ProposalState, Report, ReportAction, ReportAlert, Severity

# family -> text a workload can put in its log (or the API in a name)
HOSTILE: dict[str, str] = {
    "html attribute": '<https://evil.example/"onmouseover="alert(1)>',
    "html attribute, single quote": "<a href='x' onclick='alert(1)'>click</a>",
    "html element": "<script>alert(2)</script><img src=x onerror=alert(3)>",
    "html entity": "&lt;script&gt; &#60;b&#62; &amp;amp;",
    "slack broadcast": "<!channel> <!here> <!everyone> <!subteam^S0SRE>",
    "slack mention": "<@U0ADMIN> <#C0PRIVATE>",
    "slack link": "<http://evil.example|https://grafana.example.com>",
    "mrkdwn control": "*bold* _italic_ ~strike~ `tick` ```fence``` > quote",
    "terminal escape": "\x1b[2J\x1b[H\x1b]0;owned\x07\x1b[8mhidden\x1b[0m\x9b31m",
    "terminal hyperlink": "\x1b]8;;http://evil.example\x1b\\docs\x1b]8;;\x1b\\",
    "rich markup": "[bold red]alarm[/bold red] [link=http://evil.example]x[/link]",
    "control characters": "bell\x07 back\x08space nul\x00 cr\rline del\x7f",
    "bidi override": "invoice\u202egnp.exe \u2066isolate\u2069 \u200fmark",
}

# what must not be found in any medium's output of the strings above
TERMINAL_CONTROLS = (
    "\x1b",
    "\x9b",
    "\x07",
    "\x08",
    "\x00",
    "\r",
    "\x7f",
    "\u202e",
    "\u2066",
    "\u2069",
    "\u200f",
)
SLACK_CONTROLS = (
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<!subteam",
    "<@U0ADMIN>",
    "<#C0PRIVATE>",
    "<http://evil",
    "<https://evil",
)


def hostile_report(text: str) -> Report:
    """A card whose every text carries `text`."""
    return Report(
        title=f"title {text}",
        severity=Severity.ERROR,
        status=f"open {text}",
        where={"workload": f"RayJob {text}"},
        primary=f"primary {text}",
        secondary=(f"secondary {text}",),
        evidence=(f"evidence {text}",),
        diagnosis=f"diagnosis {text}",
        actions=(ReportAction("p-1", f"k8s.x {text}", f"preview {text}", ProposalState.OFFERED),),
        withheld=(f"withheld {text}",),
        history=(f"history {text}",),
        memory=f"memory {text}",
        cause=f"cause {text}",
        steps=(f"step {text}",),
        runbook=(f"https://runbook.example/{text}",),
        sureness=f"sure {text}",
        alerts=(ReportAlert(f"alert {text}", source=f"https://prom.example/{text}"),),
    )


# what the preview itself writes: element -> the attributes it may carry
ELEMENTS = {
    "html": set(),
    "head": set(),
    "meta": {"charset"},
    "title": set(),
    "style": set(),
    "body": set(),
    "div": {"class"},
    "h1": set(),
    "hr": set(),
    "pre": set(),
    "code": set(),
    "b": set(),
    "i": set(),
    "a": {"href"},
    "button": {"class"},
}


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(page: str) -> Elements:
    elements = Elements()
    elements.feed(page)
    elements.close()
    return elements

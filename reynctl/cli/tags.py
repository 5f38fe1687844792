"""`reynctl tag` and `reynctl tags`: durable names for seqs (issue 24)."""

from __future__ import annotations

import click

from reynctl import render
from reynctl.cli.completion import _complete_seq
from reynctl.cli.group import cli
from reynctl.cli.options import SEQ, Options, examples, json_option, pass_opts
from reynd.protocol import tag_methods as t


@cli.command(
    epilog=examples(
        "reynctl tag good                # name the tip `good`",
        "reynctl tag before-refactor 42  # name seq 42",
        "reynctl tag -f good 57          # move `good` to seq 57",
        "reynctl rewind good --yes       # a tag goes wherever a seq does",
        "reynctl tag --delete good",
    )
)
@click.argument("name")
@click.argument("seq", type=SEQ, required=False, shell_complete=_complete_seq)
@click.option("--force", "-f", is_flag=True, help="Move the tag if it names another seq.")
@click.option("--delete", "-d", is_flag=True, help="Remove the tag.")
@json_option
@pass_opts
def tag(opts: Options, name: str, seq: int | None, force: bool, delete: bool) -> None:
    """Name SEQ (default: the tip) NAME, durably.

    The name follows the agent-name rules and is not all digits; from then
    on it goes wherever a seq does (`rewind`, `checkout`, `show`, `diff`).
    Tags are not rewound: a tag made on a branch a rewind abandons still
    names its seq. A tag whose history retention collects is kept, and says
    it dangles.
    """
    if delete and (seq is not None or force):
        raise click.UsageError("--delete takes only the tag's name")
    with opts.client() as c:
        if delete:
            reply = c.call("tags.delete", t.TagsDeleteParams(name=name), t.TagInfo)
        else:
            params = t.TagsSetParams(name=name, seq=seq, force=force)
            reply = c.call("tags.set", params, t.TagInfo)
    opts.emit(reply, lambda: render.tag_text(reply.value, deleted=delete))


@cli.command(epilog=examples("reynctl tags", "reynctl tags --json | jq '.tags[].name'"))
@json_option
@pass_opts
def tags(opts: Options) -> None:
    """List the tags, by name: the seq each names, and which ones dangle."""
    with opts.client() as c:
        reply = c.call("tags.list", t.TagsListParams(), t.TagsListResult)
    opts.emit(reply, lambda: render.tags_table(reply.value, opts.style))

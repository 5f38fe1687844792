"""How a serialized value is held in a record: packed as it is, or compressed (pure).

A LangGraph value is a few hundred bytes of msgpack that mostly repeats the
same names (`langchain_core.messages.ai`, `additional_kwargs`,
`model_validate_json`...): compressed alone, it hardly shrinks, and the
records of a thread repeat those names in every message. So a value of
ZIP_MIN bytes or more is compressed (raw deflate) against a preset
dictionary, DICTIONARY: LangChain messages as JsonPlusSerializer writes
them, frozen here as bytes (a test checks its digest: a record names it,
and any change would make the records written with it unreadable). It is
kept when it takes fewer bytes of the record than the packed form; its type
then reads `z1:` and the serializer's type, its text is base64 (compressed
bytes are mostly above 0x7f, which the packed form spends two bytes of JSON
on). The bench's messages take about half; a whole message list about an
eighth. Records written before hold no such type and read as they did.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any, Final

import msgspec
from langgraph.checkpoint.serde.base import SerializerProtocol

from reynctl.external.records import pack, unpack

__all__ = ["DICTIONARY", "ZIP", "ZIP_MIN", "loads", "stored"]

ZIP: Final = "z1:"  # the type prefix of a value compressed against DICTIONARY
ZIP_MIN: Final = 128  # serialized bytes from which compressing is tried
_LEVEL: Final = 6  # 80 KB of messages in ~0.8 ms. Level 9: ~2% less, slower
# zlib's default (8) allocates ~256 KB of tables per value: 45 us a message where 4 takes
# 17 us, to the same bytes (a message is far smaller than even 4's tables).
_MEM_LEVEL: Final = 4
_json: Final = msgspec.json.Encoder()

# LangChain messages (system, human, an AI tool call with Anthropic's metadata, a tool
# result, an AI answer with OpenAI's) serialized by JsonPlusSerializer, one by one last:
# deflate reaches the end of its dictionary most cheaply. Never change: make a `z2:`.
DICTIONARY: Final = base64.b64decode(
    "gahtZXNzYWdlc5HH5QWUvWxhbmdjaGFpbl9jb3JlLm1lc3NhZ2VzLmh1bWFurEh1bWFuTWVzc2FnZYanY29udGVudNk6V2hh"
    "dCBpcyB0aGUgc3RhdHVzIG9mIHRoZSBidWlsZD8gUGxlYXNlIGNoZWNrIGFuZCB0ZWxsIG1lLrFhZGRpdGlvbmFsX2t3YXJn"
    "c4CxcmVzcG9uc2VfbWV0YWRhdGGApHR5cGWlaHVtYW6kbmFtZcCiaWTZJDZmMWMyYTNiLTRkNWUtNGY2MC04YTdiLTljMGQx"
    "ZTJmM2E0YrNtb2RlbF92YWxpZGF0ZV9qc29ulcgBAwWUvmxhbmdjaGFpbl9jb3JlLm1lc3NhZ2VzLnN5c3Rlba1TeXN0ZW1N"
    "ZXNzYWdlhqdjb250ZW502VVZb3UgYXJlIGEgaGVscGZ1bCBhc3Npc3RhbnQuIEFuc3dlciB0aGUgdXNlcidzIHF1ZXN0aW9u"
    "LCB1c2luZyB0aGUgdG9vbHMgd2hlbiBuZWVkZWQusWFkZGl0aW9uYWxfa3dhcmdzgLFyZXNwb25zZV9tZXRhZGF0YYCkdHlw"
    "ZaZzeXN0ZW2kbmFtZcCiaWTZJDAwMDAwMDAwLTAwMDAtNDAwMC04MDAwLTAwMDAwMDAwMDAwMLNtb2RlbF92YWxpZGF0ZV9q"
    "c29ux+UFlL1sYW5nY2hhaW5fY29yZS5tZXNzYWdlcy5odW1hbqxIdW1hbk1lc3NhZ2WGp2NvbnRlbnTZOldoYXQgaXMgdGhl"
    "IHN0YXR1cyBvZiB0aGUgYnVpbGQ/IFBsZWFzZSBjaGVjayBhbmQgdGVsbCBtZS6xYWRkaXRpb25hbF9rd2FyZ3OAsXJlc3Bv"
    "bnNlX21ldGFkYXRhgKR0eXBlpWh1bWFupG5hbWXAomlk2SQ2ZjFjMmEzYi00ZDVlLTRmNjAtOGE3Yi05YzBkMWUyZjNhNGKz"
    "bW9kZWxfdmFsaWRhdGVfanNvbsgCuAWUumxhbmdjaGFpbl9jb3JlLm1lc3NhZ2VzLmFpqUFJTWVzc2FnZYmnY29udGVudKCx"
    "YWRkaXRpb25hbF9rd2FyZ3OBp3JlZnVzYWzAsXJlc3BvbnNlX21ldGFkYXRhh6JpZLRtc2dfMDEyMzQ1Njc4OWFiY2RlZqVt"
    "b2RlbLhjbGF1ZGUtc29ubmV0LTQtMjAyNTA1MTSrc3RvcF9yZWFzb26oZW5kX3R1cm6tc3RvcF9zZXF1ZW5jZcCldXNhZ2WF"
    "u2NhY2hlX2NyZWF0aW9uX2lucHV0X3Rva2VucwC3Y2FjaGVfcmVhZF9pbnB1dF90b2tlbnMArGlucHV0X3Rva2Vuc80DLK1v"
    "dXRwdXRfdG9rZW5zOaxzZXJ2aWNlX3RpZXKoc3RhbmRhcmSqbW9kZWxfbmFtZbhjbGF1ZGUtc29ubmV0LTQtMjAyNTA1MTSu"
    "bW9kZWxfcHJvdmlkZXKpYW50aHJvcGljpHR5cGWiYWmkbmFtZcCiaWTZK3J1bi0tNmYxYzJhM2ItNGQ1ZS00ZjYwLThhN2It"
    "OWMwZDFlMmYzYTRiLTCqdG9vbF9jYWxsc5GEpG5hbWWmc2VhcmNopGFyZ3OBpXF1ZXJ5pnN0YXR1c6JpZLtjYWxsXzAxMjM0"
    "NTY3ODlhYmNkZWZBQkNERUakdHlwZal0b29sX2NhbGyyaW52YWxpZF90b29sX2NhbGxzkK51c2FnZV9tZXRhZGF0YYWsaW5w"
    "dXRfdG9rZW5zzQMsrW91dHB1dF90b2tlbnM5rHRvdGFsX3Rva2Vuc80DZbNpbnB1dF90b2tlbl9kZXRhaWxzgqVhdWRpbwCq"
    "Y2FjaGVfcmVhZAC0b3V0cHV0X3Rva2VuX2RldGFpbHOCpWF1ZGlvAKlyZWFzb25pbmcAs21vZGVsX3ZhbGlkYXRlX2pzb27I"
    "AQsFlLxsYW5nY2hhaW5fY29yZS5tZXNzYWdlcy50b29sq1Rvb2xNZXNzYWdliadjb250ZW50vFRoZSByZXN1bHQgb2YgdGhl"
    "IHRvb2wgY2FsbC6xYWRkaXRpb25hbF9rd2FyZ3OAsXJlc3BvbnNlX21ldGFkYXRhgKR0eXBlpHRvb2ykbmFtZaZzZWFyY2ii"
    "aWTZJDdhOGI5YzBkLTFlMmYtNGEzYi04YzRkLTVlNmY3YThiOWMwZKx0b29sX2NhbGxfaWS7Y2FsbF8wMTIzNDU2Nzg5YWJj"
    "ZGVmQUJDREVGqGFydGlmYWN0wKZzdGF0dXOnc3VjY2Vzc7Ntb2RlbF92YWxpZGF0ZV9qc29uyAMgBZS6bGFuZ2NoYWluX2Nv"
    "cmUubWVzc2FnZXMuYWmpQUlNZXNzYWdliadjb250ZW502SlIZXJlIGlzIHdoYXQgSSBmb3VuZC4gVGhlIGJ1aWxkIGlzIGdy"
    "ZWVuLrFhZGRpdGlvbmFsX2t3YXJnc4GncmVmdXNhbMCxcmVzcG9uc2VfbWV0YWRhdGGIq3Rva2VuX3VzYWdlhbFjb21wbGV0"
    "aW9uX3Rva2VuczmtcHJvbXB0X3Rva2Vuc80DLKx0b3RhbF90b2tlbnPNA2W5Y29tcGxldGlvbl90b2tlbnNfZGV0YWlsc4S6"
    "YWNjZXB0ZWRfcHJlZGljdGlvbl90b2tlbnMArGF1ZGlvX3Rva2VucwCwcmVhc29uaW5nX3Rva2VucwC6cmVqZWN0ZWRfcHJl"
    "ZGljdGlvbl90b2tlbnMAtXByb21wdF90b2tlbnNfZGV0YWlsc4KsYXVkaW9fdG9rZW5zAK1jYWNoZWRfdG9rZW5zAK5tb2Rl"
    "bF9wcm92aWRlcqZvcGVuYWmqbW9kZWxfbmFtZbZncHQtNG8tbWluaS0yMDI0LTA3LTE4snN5c3RlbV9maW5nZXJwcmludK1m"
    "cF8wMTIzNDU2Nzg5omlkuWNoYXRjbXBsLTAxMjM0NTY3ODlhYmNkZWasc2VydmljZV90aWVyp2RlZmF1bHStZmluaXNoX3Jl"
    "YXNvbqp0b29sX2NhbGxzqGxvZ3Byb2JzwKR0eXBlomFppG5hbWXAomlk2StydW4tLTdhOGI5YzBkLTFlMmYtNGEzYi04YzRk"
    "LTVlNmY3YThiOWMwZC0wqnRvb2xfY2FsbHOQsmludmFsaWRfdG9vbF9jYWxsc5CudXNhZ2VfbWV0YWRhdGGFrGlucHV0X3Rv"
    "a2Vuc80DLK1vdXRwdXRfdG9rZW5zOax0b3RhbF90b2tlbnPNA2WzaW5wdXRfdG9rZW5fZGV0YWlsc4KlYXVkaW8AqmNhY2hl"
    "X3JlYWQAtG91dHB1dF90b2tlbl9kZXRhaWxzgqVhdWRpbwCpcmVhc29uaW5nALNtb2RlbF92YWxpZGF0ZV9qc29uyAEDBZS+"
    "bGFuZ2NoYWluX2NvcmUubWVzc2FnZXMuc3lzdGVtrVN5c3RlbU1lc3NhZ2WGp2NvbnRlbnTZVVlvdSBhcmUgYSBoZWxwZnVs"
    "IGFzc2lzdGFudC4gQW5zd2VyIHRoZSB1c2VyJ3MgcXVlc3Rpb24sIHVzaW5nIHRoZSB0b29scyB3aGVuIG5lZWRlZC6xYWRk"
    "aXRpb25hbF9rd2FyZ3OAsXJlc3BvbnNlX21ldGFkYXRhgKR0eXBlpnN5c3RlbaRuYW1lwKJpZNkkMDAwMDAwMDAtMDAwMC00"
    "MDAwLTgwMDAtMDAwMDAwMDAwMDAws21vZGVsX3ZhbGlkYXRlX2pzb27H5QWUvWxhbmdjaGFpbl9jb3JlLm1lc3NhZ2VzLmh1"
    "bWFurEh1bWFuTWVzc2FnZYanY29udGVudNk6V2hhdCBpcyB0aGUgc3RhdHVzIG9mIHRoZSBidWlsZD8gUGxlYXNlIGNoZWNr"
    "IGFuZCB0ZWxsIG1lLrFhZGRpdGlvbmFsX2t3YXJnc4CxcmVzcG9uc2VfbWV0YWRhdGGApHR5cGWlaHVtYW6kbmFtZcCiaWTZ"
    "JDZmMWMyYTNiLTRkNWUtNGY2MC04YTdiLTljMGQxZTJmM2E0YrNtb2RlbF92YWxpZGF0ZV9qc29uyAK4BZS6bGFuZ2NoYWlu"
    "X2NvcmUubWVzc2FnZXMuYWmpQUlNZXNzYWdliadjb250ZW50oLFhZGRpdGlvbmFsX2t3YXJnc4GncmVmdXNhbMCxcmVzcG9u"
    "c2VfbWV0YWRhdGGHomlktG1zZ18wMTIzNDU2Nzg5YWJjZGVmpW1vZGVsuGNsYXVkZS1zb25uZXQtNC0yMDI1MDUxNKtzdG9w"
    "X3JlYXNvbqhlbmRfdHVybq1zdG9wX3NlcXVlbmNlwKV1c2FnZYW7Y2FjaGVfY3JlYXRpb25faW5wdXRfdG9rZW5zALdjYWNo"
    "ZV9yZWFkX2lucHV0X3Rva2VucwCsaW5wdXRfdG9rZW5zzQMsrW91dHB1dF90b2tlbnM5rHNlcnZpY2VfdGllcqhzdGFuZGFy"
    "ZKptb2RlbF9uYW1luGNsYXVkZS1zb25uZXQtNC0yMDI1MDUxNK5tb2RlbF9wcm92aWRlcqlhbnRocm9waWOkdHlwZaJhaaRu"
    "YW1lwKJpZNkrcnVuLS02ZjFjMmEzYi00ZDVlLTRmNjAtOGE3Yi05YzBkMWUyZjNhNGItMKp0b29sX2NhbGxzkYSkbmFtZaZz"
    "ZWFyY2ikYXJnc4GlcXVlcnmmc3RhdHVzomlku2NhbGxfMDEyMzQ1Njc4OWFiY2RlZkFCQ0RFRqR0eXBlqXRvb2xfY2FsbLJp"
    "bnZhbGlkX3Rvb2xfY2FsbHOQrnVzYWdlX21ldGFkYXRhhaxpbnB1dF90b2tlbnPNAyytb3V0cHV0X3Rva2VuczmsdG90YWxf"
    "dG9rZW5zzQNls2lucHV0X3Rva2VuX2RldGFpbHOCpWF1ZGlvAKpjYWNoZV9yZWFkALRvdXRwdXRfdG9rZW5fZGV0YWlsc4Kl"
    "YXVkaW8AqXJlYXNvbmluZwCzbW9kZWxfdmFsaWRhdGVfanNvbsgBCwWUvGxhbmdjaGFpbl9jb3JlLm1lc3NhZ2VzLnRvb2yr"
    "VG9vbE1lc3NhZ2WJp2NvbnRlbnS8VGhlIHJlc3VsdCBvZiB0aGUgdG9vbCBjYWxsLrFhZGRpdGlvbmFsX2t3YXJnc4CxcmVz"
    "cG9uc2VfbWV0YWRhdGGApHR5cGWkdG9vbKRuYW1lpnNlYXJjaKJpZNkkN2E4YjljMGQtMWUyZi00YTNiLThjNGQtNWU2Zjdh"
    "OGI5YzBkrHRvb2xfY2FsbF9pZLtjYWxsXzAxMjM0NTY3ODlhYmNkZWZBQkNERUaoYXJ0aWZhY3TApnN0YXR1c6dzdWNjZXNz"
    "s21vZGVsX3ZhbGlkYXRlX2pzb27IAyAFlLpsYW5nY2hhaW5fY29yZS5tZXNzYWdlcy5haalBSU1lc3NhZ2WJp2NvbnRlbnTZ"
    "KUhlcmUgaXMgd2hhdCBJIGZvdW5kLiBUaGUgYnVpbGQgaXMgZ3JlZW4usWFkZGl0aW9uYWxfa3dhcmdzgadyZWZ1c2FswLFy"
    "ZXNwb25zZV9tZXRhZGF0YYirdG9rZW5fdXNhZ2WFsWNvbXBsZXRpb25fdG9rZW5zOa1wcm9tcHRfdG9rZW5zzQMsrHRvdGFs"
    "X3Rva2Vuc80DZbljb21wbGV0aW9uX3Rva2Vuc19kZXRhaWxzhLphY2NlcHRlZF9wcmVkaWN0aW9uX3Rva2VucwCsYXVkaW9f"
    "dG9rZW5zALByZWFzb25pbmdfdG9rZW5zALpyZWplY3RlZF9wcmVkaWN0aW9uX3Rva2VucwC1cHJvbXB0X3Rva2Vuc19kZXRh"
    "aWxzgqxhdWRpb190b2tlbnMArWNhY2hlZF90b2tlbnMArm1vZGVsX3Byb3ZpZGVypm9wZW5haaptb2RlbF9uYW1ltmdwdC00"
    "by1taW5pLTIwMjQtMDctMTiyc3lzdGVtX2ZpbmdlcnByaW50rWZwXzAxMjM0NTY3ODmiaWS5Y2hhdGNtcGwtMDEyMzQ1Njc4"
    "OWFiY2RlZqxzZXJ2aWNlX3RpZXKnZGVmYXVsdK1maW5pc2hfcmVhc29uqnRvb2xfY2FsbHOobG9ncHJvYnPApHR5cGWiYWmk"
    "bmFtZcCiaWTZK3J1bi0tN2E4YjljMGQtMWUyZi00YTNiLThjNGQtNWU2ZjdhOGI5YzBkLTCqdG9vbF9jYWxsc5CyaW52YWxp"
    "ZF90b29sX2NhbGxzkK51c2FnZV9tZXRhZGF0YYWsaW5wdXRfdG9rZW5zzQMsrW91dHB1dF90b2tlbnM5rHRvdGFsX3Rva2Vu"
    "c80DZbNpbnB1dF90b2tlbl9kZXRhaWxzgqVhdWRpbwCqY2FjaGVfcmVhZAC0b3V0cHV0X3Rva2VuX2RldGFpbHOCpWF1ZGlv"
    "AKlyZWFzb25pbmcAs21vZGVsX3ZhbGlkYXRlX2pzb24="
)


def stored(type_: str, data: bytes) -> tuple[str, str]:
    """(type, text) that a record holds for serialized `data`: compressed when that is
    smaller in the record's JSON (from ZIP_MIN bytes), packed as it is otherwise."""
    packed = pack(data)
    if len(data) >= ZIP_MIN:
        deflate = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15, _MEM_LEVEL, zdict=DICTIONARY)
        text = base64.b64encode(deflate.compress(data) + deflate.flush()).decode("ascii")
        # In the record's JSON: quotes, the type's prefix; base64 never needs an escape.
        if len(text) + 2 + len(ZIP) < len(_json.encode(packed)):
            return ZIP + type_, text
    return type_, packed


def loads(serde: SerializerProtocol, type_: str, text: str) -> Any:
    """The value a record's (type, text) holds (`stored`'s, or packed by an older saver)."""
    if type_.startswith(ZIP):
        inflate = zlib.decompressobj(-15, zdict=DICTIONARY)
        data = inflate.decompress(base64.b64decode(text)) + inflate.flush()
        return serde.loads_typed((type_[len(ZIP) :], data))
    return serde.loads_typed((type_, unpack(text)))

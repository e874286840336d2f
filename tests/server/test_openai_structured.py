"""Structured output and tool calling over the official `openai` client,
unchanged, against the real server: the default model for every response
format (chat.completions.parse with a Pydantic model, json_schema strict,
json_object, vLLM's structured_outputs regex / choice / grammar), tools with
tool_choice auto, required and a named function, streamed and not, a
two-turn tool loop and parallel_tool_calls; every answer parses and
validates against its schema (jsonschema). Bad schemas, grammars and tool
lists are refused with 400 naming the field, and the server goes on.

The same over gRPC (beacon.v1 StructuredOutput, ChatInput.tools,
GenerateResponse.tool_calls): the same greedy answers as over HTTP, and
INVALID_ARGUMENT naming the field for a bad grammar.

Then reasoning: a tiny random-weight model behind the DeepSeek-R1 distill's
vocabulary, with its template and with QwQ's, a Qwen template (as tests/server/test_reasoning.py): the constraint
starts after </think> (reasoning_content is the same with and without a
response format) and tool calls come out of the answer, never the reasoning.

Env: BEACON_BIN, BEACON_MODEL, BEACON_SOURCE_DIR.
"""
import json
import os
import sys

import grpc
import jsonschema
import openai
import pydantic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import SRC, Server, expect_rpc_error, pb  # noqa: E402

VOCAB = os.path.join(SRC, "tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf")
DUMMY = "dummy:" + os.path.join(SRC, "tests/data/tiny-r1-qwen2.json")
TEMPLATES = os.path.join(SRC, "tests/fixtures/chat_templates")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                     "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The local time in a timezone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}
# Parameters xgrammar enforces looser than written (oneOf's overlapping branches as anyOf).
LOOSE = {"type": "object", "properties": {"n": {"oneOf": [{"type": "integer"}, {"type": "number"}]}},
         "required": ["n"]}
# For the random-weight model, whose strings never end by themselves: enums only.
UNIT = {"type": "function", "function": {
    "name": "set_unit", "parameters": {"type": "object", "properties": {"unit": {"enum": ["celsius", "kelvin"]}},
                                       "required": ["unit"]}}}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, TIME, UNIT)}
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


def client(srv):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{srv.http_port}/v1", api_key="x", max_retries=0, timeout=120)


def check_calls(calls, names=None):
    assert calls, "no tool calls"
    for c in calls:
        assert c.type == "function" and c.id.startswith("call_"), c
        assert c.function.name in (names or SCHEMAS), c
        jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])


def streamed_calls(stream):
    """(content, {index: (name, arguments)}, finish_reason) of a streamed answer."""
    content, calls, finish = "", {}, None
    for chunk in stream:
        for ch in chunk.choices:
            content += ch.delta.content or ""
            for tc in ch.delta.tool_calls or []:
                name, args = calls.get(tc.index, ("", ""))
                calls[tc.index] = (name + (tc.function.name or ""), args + (tc.function.arguments or ""))
            finish = ch.finish_reason or finish
    return content, calls, finish


# Bounded, so that the 135M model's greedy text ends inside max_tokens on every CPU: unbounded, its name
# ran on past 120 tokens on an AVX2-only machine (whose kernels round differently from AVX-512's).
class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=40)
    age: int = pydantic.Field(ge=0, le=150)
    languages: list[pydantic.constr(max_length=20)] = pydantic.Field(max_length=4)


def test_response_formats(c):
    # chat.completions.parse with a Pydantic model: strict json_schema underneath.
    r = c.chat.completions.parse(model="default", messages=[{"role": "user", "content": "Describe a programmer."}],
                                 response_format=Person, max_tokens=120, temperature=0)
    person = r.choices[0].message.parsed
    assert isinstance(person, Person), r
    assert r.choices[0].finish_reason == "stop", r
    # json_schema, strict: nested objects, enums, arrays and numbers; the keys in the schema's order.
    schema = {"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 40},
        "rating": {"type": "number", "minimum": 0, "maximum": 5},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "author": {"type": "object", "properties": {"first": {"type": "string"}, "born": {"type": "integer"}},
                   "required": ["first", "born"], "additionalProperties": False},
        "genre": {"enum": ["novel", "poetry", "essay"]}},
        "required": ["title", "rating", "tags", "author", "genre"], "additionalProperties": False}
    for temperature in (0, 1.0):
        r = c.chat.completions.create(model="default", messages=[{"role": "user", "content": "Review a book."}],
                                      max_tokens=200, temperature=temperature, seed=5,
                                      response_format={"type": "json_schema", "json_schema": {
                                          "name": "review", "strict": True, "schema": schema}})
        text = r.choices[0].message.content
        doc = json.loads(text)
        jsonschema.validate(doc, schema)
        assert list(doc) == list(schema["properties"]), text
    # json_object: any JSON object. Nothing in its grammar bounds the text, and greedy, the 135M model
    # repeated "2.0, " in an array to max_tokens on an AVX2-only machine (AVX-512 machines stopped
    # without help); a mild repetition penalty ends it there (61 tokens at 1.1, 34 at 1.2).
    r = c.chat.completions.create(model="default", messages=[{"role": "user", "content": "Answer in JSON: what is 2+2?"}],
                                  max_tokens=400, temperature=0, response_format={"type": "json_object"},
                                  extra_body={"repetition_penalty": 1.2})
    assert r.choices[0].finish_reason == "stop", r
    assert isinstance(json.loads(r.choices[0].message.content), dict), r
    # vLLM's structured_outputs: regex, choice, EBNF grammar; also on /v1/completions.
    r = c.chat.completions.create(model="default", messages=[{"role": "user", "content": "A date?"}], max_tokens=20,
                                  temperature=0, extra_body={"structured_outputs": {"regex": r"20[0-9]{2}-[01][0-9]"}})
    assert __import__("re").fullmatch(r"20[0-9]{2}-[01][0-9]", r.choices[0].message.content), r
    r = c.chat.completions.create(model="default", messages=[{"role": "user", "content": "Is the sea wet?"}],
                                  max_tokens=5, temperature=0,
                                  extra_body={"structured_outputs": {"choice": ["yes", "no", "perhaps"]}})
    assert r.choices[0].message.content in ("yes", "no", "perhaps"), r
    grammar = 'root ::= "(" num " " op " " num ")"\nnum ::= [1-9] [0-9]?\nop ::= "+" | "-"'
    r = c.completions.create(model="default", prompt="An arithmetic expression:", max_tokens=20, temperature=0,
                             extra_body={"structured_outputs": {"grammar": grammar}})
    assert __import__("re").fullmatch(r"\([1-9][0-9]? [+-] [1-9][0-9]?\)", r.choices[0].text), r
    # Streamed, the same text as whole.
    kw = dict(model="default", messages=[{"role": "user", "content": "Describe a programmer."}], max_tokens=120,
              temperature=0, response_format={"type": "json_schema", "json_schema": {
                  "name": "p", "strict": True, "schema": Person.model_json_schema()}})
    whole = c.chat.completions.create(**kw).choices[0].message.content
    streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(stream=True, **kw)
                       if ch.choices)
    assert streamed == whole and Person.model_validate_json(whole), (streamed, whole)
    print("response formats: parse, json_schema strict, json_object, regex, choice, grammar")


def test_tools(c):
    # required: at least one call, arguments valid against the tool's schema.
    r = c.chat.completions.create(model="default", messages=ASK, tools=[WEATHER, TIME], tool_choice="required",
                                  max_tokens=120, temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch
    check_calls(ch.message.tool_calls)
    # Streamed: the same calls, as OpenAI's tool_calls deltas.
    content, calls, finish = streamed_calls(c.chat.completions.create(
        model="default", messages=ASK, tools=[WEATHER, TIME], tool_choice="required", max_tokens=120,
        temperature=0, stream=True))
    assert finish == "tool_calls" and not content, (content, calls, finish)
    assert [(t.function.name, json.loads(t.function.arguments)) for t in ch.message.tool_calls] == \
        [(n, json.loads(a)) for n, a in (calls[i] for i in sorted(calls))], (calls, ch.message.tool_calls)
    # A named function: exactly one call of it; parallel_tool_calls false: one call.
    for kw in ({"tool_choice": {"type": "function", "function": {"name": "get_time"}}},
               {"tool_choice": "required", "parallel_tool_calls": False}):
        r = c.chat.completions.create(model="default", messages=ASK, tools=[WEATHER, TIME], max_tokens=120,
                                      temperature=0, **kw)
        calls = r.choices[0].message.tool_calls
        assert len(calls) == 1, r
        check_calls(calls, ["get_time"] if "function" in str(kw["tool_choice"]) else None)
    # auto: text or calls, whichever the model writes; calls that parse are valid.
    for stream in (False, True):
        kw = dict(model="default", messages=ASK, tools=[WEATHER, TIME], max_tokens=120, temperature=0)
        if stream:
            content, calls, finish = streamed_calls(c.chat.completions.create(stream=True, **kw))
            assert content or calls, finish
            for name, args in calls.values():
                jsonschema.validate(json.loads(args), SCHEMAS[name])
        else:
            m = c.chat.completions.create(**kw).choices[0].message
            assert m.content or m.tool_calls, m
            if m.tool_calls:
                check_calls(m.tool_calls)
    # auto under the call grammar (constrain_tool_calls): any call is valid.
    r = c.chat.completions.create(model="default", messages=ASK, tools=[WEATHER], max_tokens=120, temperature=0,
                                  extra_body={"constrain_tool_calls": True})
    if r.choices[0].message.tool_calls:
        check_calls(r.choices[0].message.tool_calls)
    print("tools: required, named, parallel off, auto (streamed and not)")


def test_tool_loop(c):
    messages = list(ASK)
    first = c.chat.completions.create(model="default", messages=messages, tools=[WEATHER], tool_choice="required",
                                      parallel_tool_calls=False, max_tokens=120, temperature=0)
    call = first.choices[0].message.tool_calls[0]
    check_calls([call])
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})})
    second = c.chat.completions.create(model="default", messages=messages, tools=[WEATHER], tool_choice="none",
                                       max_tokens=40, temperature=0)
    m = second.choices[0].message
    assert m.content and not m.tool_calls, m
    # The call and its result are in the prompt: longer than without the result.
    without = c.chat.completions.create(model="default", messages=messages[:-1], tools=[WEATHER], tool_choice="none",
                                        max_tokens=1, temperature=0)
    assert second.usage.prompt_tokens > without.usage.prompt_tokens + 10, (without.usage, second.usage)
    print(f"tool loop: {call.function.name}({call.function.arguments}) -> {m.content[:60]!r}")


def test_refusals(c):
    bad = [
        (dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}),
         "response_format.json_schema.schema"),
        (dict(response_format={"type": "xml"}), "response_format.type"),
        (dict(extra_body={"structured_outputs": {"regex": "(unclosed"}}), "structured_outputs.regex"),
        (dict(extra_body={"structured_outputs": {"grammar": "root ::= missing"}}), "structured_outputs.grammar"),
        (dict(extra_body={"structured_outputs": {"choice": []}}), "structured_outputs.choice"),
        (dict(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
        (dict(tool_choice="required"), "tool_choice"),
        (dict(tools=[{"type": "function", "function": {"name": "bad name!"}}]), "tools[0].function.name"),
        (dict(tools=[WEATHER, WEATHER]), "tools[1].function.name"),
        (dict(tools=[{"type": "retrieval"}]), "tools[0].type"),
        (dict(tools=[WEATHER], tool_choice="required", response_format={"type": "json_object"}), "tool_choice"),
        (dict(reasoning_effort="extreme"), "reasoning_effort"),
        # strict, but xgrammar could only enforce oneOf's overlapping branches as anyOf (non-strict compiles).
        (dict(response_format={"type": "json_schema", "json_schema": {
            "name": "x", "strict": True, "schema": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}}),
         "response_format.json_schema.schema"),
        (dict(extra_body={"structured_outputs": {"regex": "a^b"}}), "structured_outputs.regex"),
        # A strict function whose parameters xgrammar would loosen, its calls constrained (required).
        (dict(tools=[WEATHER, dict(UNIT, function=dict(UNIT["function"], strict=True, parameters=LOOSE))],
              tool_choice="required"), "tools[1].function.parameters"),
        (dict(tools=[dict(WEATHER, function=dict(WEATHER["function"], parameters={"type": "object",
                                                                                  "p": "x" * 40000}))]),
         "tools[0].function.parameters"),
    ]
    for kw, param in bad:
        try:
            c.chat.completions.create(model="default", messages=ASK, max_tokens=5, **kw)
        except openai.BadRequestError as e:
            assert e.body["param"] == param, (kw, e.body)
            continue
        raise AssertionError(f"not refused: {kw}")
    # The same schema without strict is served (the looser grammar; the server's log names it).
    r = c.chat.completions.create(model="default", messages=ASK, max_tokens=5, response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"oneOf": [{"type": "integer"},
                                                                                 {"type": "number"}]}}})
    assert r.choices[0].finish_reason in ("stop", "length"), r
    # And so is the function without strict, its calls constrained by the looser grammar.
    r = c.chat.completions.create(model="default", messages=ASK, max_tokens=24, tool_choice="required",
                                  tools=[dict(UNIT, function=dict(UNIT["function"], parameters=LOOSE))])
    assert r.choices[0].finish_reason in ("tool_calls", "length"), r
    # The server is unharmed.
    r = c.chat.completions.create(model="default", messages=ASK, max_tokens=5)
    assert r.choices[0].message.content is not None
    print(f"refusals: {len(bad)} bad inputs, each 400 naming its field")


def test_grpc(srv, c):
    schema = Person.model_json_schema()
    ask = [{"role": "user", "content": "Describe a programmer."}]
    http = c.chat.completions.create(model="default", messages=ask, max_tokens=120, temperature=0,
                                     response_format={"type": "json_schema", "json_schema": {
                                         "name": "p", "strict": True, "schema": schema}}).choices[0].message.content
    chat = pb.ChatInput(messages=[pb.ChatMessage(role="user", content=ask[0]["content"])])
    req = pb.GenerateRequest(chat=chat, sampling=pb.SamplingParams(temperature=0),
                             stopping=pb.StoppingCriteria(max_tokens=120),
                             structured=pb.StructuredOutput(json_schema=json.dumps(schema), strict=True))
    text = "".join(m.text for m in srv.stub.Generate(req))
    assert text == http and Person.model_validate_json(text), (text, http)
    # Tools: required, the calls typed in the stream, the same as over HTTP.
    tool = WEATHER["function"]
    http_calls = c.chat.completions.create(model="default", messages=ASK, tools=[WEATHER], tool_choice="required",
                                           max_tokens=120, temperature=0).choices[0].message.tool_calls
    chat = pb.ChatInput(messages=[pb.ChatMessage(role="user", content=ASK[0]["content"])],
                        tools=[pb.Tool(name=tool["name"], description=tool["description"],
                                       parameters=json.dumps(tool["parameters"]))],
                        tool_choice=pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_REQUIRED))
    calls, text = [], ""
    for m in srv.stub.Generate(pb.GenerateRequest(chat=chat, sampling=pb.SamplingParams(temperature=0),
                                                  stopping=pb.StoppingCriteria(max_tokens=120))):
        calls += m.tool_calls
        text += m.text
    assert not text and [(t.name, json.loads(t.arguments)) for t in calls] == \
        [(t.function.name, json.loads(t.function.arguments)) for t in http_calls], (text, calls, http_calls)
    assert all(t.id.startswith("call_") for t in calls), calls
    # A tool turn back: the history renders (the second answer is text under tool_choice none).
    chat.messages.append(pb.ChatMessage(role="assistant", tool_calls=calls[:1]))
    chat.messages.append(pb.ChatMessage(role="tool", tool_call_id=calls[0].id, content='{"temperature": 21}'))
    chat.tool_choice.CopyFrom(pb.ToolChoice(mode=pb.TOOL_CHOICE_MODE_NONE))
    out = list(srv.stub.Generate(pb.GenerateRequest(chat=chat, sampling=pb.SamplingParams(temperature=0),
                                                    stopping=pb.StoppingCriteria(max_tokens=20))))
    assert "".join(m.text for m in out) and not any(m.tool_calls for m in out), out
    bad = pb.GenerateRequest(text="x", structured=pb.StructuredOutput(regex="(unclosed"))
    expect_rpc_error(lambda: srv.stub.Generate(bad), grpc.StatusCode.INVALID_ARGUMENT, "structured.regex")
    bad = pb.GenerateRequest(chat=pb.ChatInput(messages=[pb.ChatMessage(role="user", content="x")],
                                               tool_choice=pb.ToolChoice(function="nope")))
    expect_rpc_error(lambda: srv.stub.Generate(bad), grpc.StatusCode.INVALID_ARGUMENT, "tool_choice")
    print("gRPC: structured output and tool calls as over HTTP")


def test_reasoning_then_structure(template=None):
    """The answer starts after </think> (forced after 6 tokens): the R1
    distill's own template, or QwQ's (Qwen's, which lists the tools itself and opens the think block)."""
    flags = ["--tokenizer", VOCAB] + (["--chat-template", os.path.join(TEMPLATES, template)] if template else [])
    with Server(*flags, model=DUMMY, threads=1) as srv:
        c = client(srv)
        kw = dict(model=c.models.list().data[0].id, messages=[{"role": "user", "content": "What is 2+2?"}],
                  max_tokens=200, temperature=0, extra_body={"max_reasoning_tokens": 6})
        if template:  # QwQ's edited template opens the block only with enable_thinking
            kw["extra_body"]["chat_template_kwargs"] = {"enable_thinking": True}
        free = c.chat.completions.create(**kw).choices[0].message
        fmt = c.chat.completions.create(response_format={"type": "json_schema", "json_schema": {
            "name": "a", "strict": True, "schema": {"type": "object", "properties": {"answer": {"enum": [3, 4, 5]}},
                                                   "required": ["answer"]}}}, **kw).choices[0].message
        # The same reasoning (the same prompt, greedy): the grammar never touched it.
        free_reasoning = free.model_extra["reasoning_content"]
        assert free_reasoning and fmt.model_extra["reasoning_content"] == free_reasoning, (free, fmt)
        assert json.loads(fmt.content)["answer"] in (3, 4, 5), fmt
        # Tools: the calls come from the answer; the reasoning stays reasoning.
        r = c.chat.completions.create(tools=[UNIT], tool_choice="required", parallel_tool_calls=False,
                                      **kw).choices[0]
        assert r.finish_reason == "tool_calls" and r.message.model_extra["reasoning_content"], r
        check_calls(r.message.tool_calls)
        reasoning, content, calls = "", "", {}
        for chunk in c.chat.completions.create(tools=[UNIT], tool_choice="required", parallel_tool_calls=False,
                                               stream=True, **kw):
            for ch in chunk.choices:
                reasoning += (ch.delta.model_extra or {}).get("reasoning_content") or ""
                content += ch.delta.content or ""
                for tc in ch.delta.tool_calls or []:
                    calls[tc.index] = (tc.function.name, tc.function.arguments)
        assert reasoning == r.message.model_extra["reasoning_content"], (reasoning, r)
        assert "set_unit" not in reasoning and not content, (reasoning, content)
        assert [n for n, _ in calls.values()] == [t.function.name for t in r.message.tool_calls], calls
    print(f"reasoning ({template or 'the R1 distill template'}): constraint and tool calls only after </think>")


def main():
    with Server() as srv:
        c = client(srv)
        test_response_formats(c)
        test_tools(c)
        test_tool_loop(c)
        test_refusals(c)
        test_grpc(srv, c)
    test_reasoning_then_structure()
    test_reasoning_then_structure("Qwen-QwQ-32B.jinja")
    print("PASS")


if __name__ == "__main__":
    main()

"""WSDL generated from what an endpoint deploys (`GET /programs/{name}?wsdl`,
`GET /?wsdl`): it validates against the WSDL 1.1 and SOAP 1.2 binding
schemas (xmllint, offline: tests/soap_schemas), its embedded XML Schema
compiles and takes the documents it describes (libxml2, through lxml), and
zeep, a real SOAP client, loads it and sees the operations it names."""

import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import requests
import zeep
from lxml import etree
from zeep.transports import Transport

import services
from mpiws.service.serve import Server
from netns import install_packages

from conftest import ROOT

SCHEMAS = Path(__file__).parent / "soap_schemas"
WSDL = "{http://schemas.xmlsoap.org/wsdl/}"
XSD = "{http://www.w3.org/2001/XMLSchema}"

CAT_CWL = {
    "cwlVersion": "v1.2",
    "class": "CommandLineTool",
    "baseCommand": "cat",
    "inputs": {"files": {"type": "File[]", "inputBinding": {}}, "n": "int?", "1st": "string?"},
    "outputs": {"joined": {"type": "stdout"}},
}


@pytest.fixture(scope="module")
def host():
    programs = [
        f"add={ROOT / 'examples' / 'add.sh'} [in:val:x:int] [in:file:y:int] [out:file:result:int]",
        "copy=cp [in:file:src:binary] [out:file:dst:binary]",
    ]
    s = Server(
        {"array_sum": services.array_sum, "block": services.block}, programs=programs, cwl_programs=[("cat", CAT_CWL)]
    )
    yield s
    s.stop()


def get(url, key):
    req = urllib.request.Request(url, headers={"authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers["content-type"], r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["content-type"], e.read()


def valid_wsdl(tmp_path, text):
    """The WSDL validated against the published schemas (its soap12 binding too) with xmllint, offline."""
    install_packages(xmllint="libxml2-utils")
    f = tmp_path / "doc.wsdl"
    f.write_bytes(text)
    p = subprocess.run(
        ["xmllint", "--nonet", "--noout", "--schema", str(SCHEMAS / "wsdl11-soap12-all.xsd"), str(f)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0 and "validates" in p.stderr, p.stderr
    return etree.fromstring(text)


def embedded_schema(doc):
    """The WSDL's types, compiled as an XML Schema (libxml2 refuses a malformed one)."""
    return etree.XMLSchema(doc.find(f"{WSDL}types/{XSD}schema"))


def test_a_programs_wsdl_validates_and_describes_it(host, tmp_path):
    status, ctype, text = get(f"{host.url}/programs/add?wsdl", host.key)
    assert (status, ctype) == (200, "text/xml; charset=utf-8")
    doc = valid_wsdl(tmp_path, text)
    ops = [o.get("name") for o in doc.findall(f"{WSDL}portType/{WSDL}operation")]
    assert ops == ["call", "spawn", "running", "results", "kill"]
    address = doc.find(f"{WSDL}service/{WSDL}port/{{http://schemas.xmlsoap.org/wsdl/soap12/}}address")
    assert address.get("location") == f"{host.url}/programs/add"
    # the schema takes a call with a value and a file by value or by URL, and refuses what the template does not name
    schema = embedded_schema(doc)
    ns = "urn:mpiws:program:add"
    ok = f'<call xmlns="{ns}"><x>1</x><y><value>41</value></y></call>'
    by_url = f'<call xmlns="{ns}"><x>1</x><y><url>http://example.org/y</url></y></call>'
    assert schema.validate(etree.fromstring(ok)) and schema.validate(etree.fromstring(by_url))
    for bad in (
        f'<call xmlns="{ns}"><x>one</x><y><value>41</value></y></call>',
        f'<call xmlns="{ns}"><x>1</x></call>',
        f'<call xmlns="{ns}"><x>1</x><y><value>4</value><url>http://e/</url></y></call>',
        f'<call xmlns="{ns}"><x>1</x><y><value>41</value></y><z>2</z></call>',
    ):
        assert not schema.validate(etree.fromstring(bad)), bad
    answer = f'<callResponse xmlns="{ns}"><jobId>j</jobId><state>done</state><exitCode>0</exitCode>'
    answer += (
        "<outputs><result><value>42</value></result></outputs><stdout><value>adding</value></stdout></callResponse>"
    )
    assert schema.validate(etree.fromstring(answer))


def test_a_cwl_tools_wsdl_has_its_lists_optional_inputs_and_xml_names(host, tmp_path):
    doc = valid_wsdl(tmp_path, get(f"{host.url}/programs/cat?wsdl", host.key)[2])
    inputs = {e.get("name"): e for e in doc.iter(f"{XSD}element") if e.getparent().getparent().get("name") == "Inputs"}
    assert set(inputs) == {"files", "n", "_1st"}, "a name that is no XML name is prefixed with _"
    assert inputs["files"].get("maxOccurs") == "unbounded" and inputs["n"].get("minOccurs") == "0"
    embedded_schema(doc)


def test_the_service_interfaces_wsdl_names_the_services_deployed(host, tmp_path):
    status, _, text = get(f"{host.url}/?wsdl", None)
    assert status == 200, "as GET /: it describes, it needs no key"
    doc = valid_wsdl(tmp_path, text)
    assert [o.get("name") for o in doc.findall(f"{WSDL}portType/{WSDL}operation")] == ["run", "status", "cancel"]
    names = [e.get("value") for e in doc.iter(f"{XSD}enumeration")]
    assert names == ["array_sum", "block"]
    embedded_schema(doc)


def test_zeep_loads_every_wsdl_and_sees_its_operations(host):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {host.key}"
    transport = Transport(session=session)
    for url, ops in [
        (f"{host.url}/programs/add?wsdl", {"call", "spawn", "running", "results", "kill"}),
        (f"{host.url}/programs/copy?wsdl", {"call", "spawn", "running", "results", "kill"}),
        (f"{host.url}/?wsdl", {"run", "status", "cancel"}),
    ]:
        client = zeep.Client(url, transport=transport)
        (service,) = client.wsdl.services.values()
        (port,) = service.ports.values()
        assert set(port.binding._operations) == ops, url
    add = zeep.Client(f"{host.url}/programs/add?wsdl", transport=transport)
    call = add.service._binding._operations["call"]
    assert [name for name, _ in call.input.body.type.elements] == ["x", "y"]


def test_a_programs_wsdl_is_behind_the_jobs_key(host):
    assert get(f"{host.url}/programs/add?wsdl", None)[0] == 401
    assert get(f"{host.url}/programs/nope?wsdl", host.key)[0] == 404

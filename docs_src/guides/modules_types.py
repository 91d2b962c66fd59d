"""Arguments and results of types JSON lacks: ids, dates, decimals, bytes, models."""

# --8<-- [start:types]
import json
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated
from uuid import UUID

import attrs
import pydantic
import trio

from actors import ArgumentsError, ToolModule, open_runtime


@attrs.define
class Ledger:
    payments: list["Payment"] = attrs.field(factory=list)


@attrs.frozen
class Payment:
    id: UUID
    day: date
    amount: Annotated[Decimal, "In euros, e.g. '12.50'."]
    received: datetime
    receipt: bytes | None = None


ledger = ToolModule("ledger", Ledger)


@ledger.tool
def record(state: Ledger, payment: Payment) -> Payment:
    """Record a payment; returns it as stored."""
    state.payments.append(payment)
    return payment


# --8<-- [end:types]


# --8<-- [start:pydantic]
class Address(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    street: str
    postcode: str
    country: str = "NL"


@ledger.tool
def send_invoice(state: Ledger, to: Address, total: Decimal) -> str:
    """Send an invoice for `total` euros to an address."""
    return f"{total} EUR to {to.street}, {to.postcode} ({to.country})"


# --8<-- [end:pydantic]


async def main() -> None:
    # --8<-- [start:schema]
    properties = ledger.tools["record"].signature.input_schema["properties"]
    for name, schema in properties.items():
        print(f"{name}: {json.dumps(schema)}")
    # --8<-- [end:schema]
    async with open_runtime([ledger]) as runtime:
        # --8<-- [start:calls]
        payment = {
            "id": "6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b",
            "day": "2026-05-09",
            "amount": "12.50",
            "received": "2026-05-09T14:30:00+02:00",
            "receipt": "JVBERi0=",
        }
        s1 = {"__sessionId": "s1"}
        result = await runtime.call_tool("ledger__record", {**payment, **s1})
        print(json.dumps(result.structured_content))
        mistakes = {
            "amount": 12.5,
            "received": "2026-05-09T14:30:00",
            "day": "2026-13-01",
        }
        try:
            await runtime.call_tool("ledger__record", {**payment, **mistakes, **s1})
        except ArgumentsError as error:
            print(error)
        # --8<-- [end:calls]
        # --8<-- [start:invoice]
        schema = ledger.tools["send_invoice"].signature.input_schema
        print(schema["properties"]["to"], list(schema["$defs"]))
        to = {"street": "Dam 1", "postcode": 1012, "city": "Amsterdam"}
        invoice = {"to": to, "total": "99.95", **s1}
        try:
            await runtime.call_tool("ledger__send_invoice", invoice)
        except ArgumentsError as error:
            print(error)
        invoice["to"] = {"street": "Dam 1", "postcode": "1012 JS"}
        print((await runtime.call_tool("ledger__send_invoice", invoice)).first_text)
        # --8<-- [end:invoice]


if __name__ == "__main__":
    trio.run(main)

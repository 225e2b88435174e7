"""The customer-service sandbox behind ``ToolUse-v0``: a real SQLite database created fresh per
episode from a seeded generator, tools that enforce the shop's business rules, and tasks with
the goal end state of the database."""

from __future__ import annotations

import random
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable

from pydantic import BaseModel, Field

from rubricgym.tools import Tool, ToolError

TODAY = 100
"""Days are integers; 'today' is day 100."""
REFUND_WINDOW_DAYS = 30

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE NOT NULL, tier TEXT NOT NULL);
CREATE TABLE addresses (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                        line TEXT NOT NULL, city TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL,
                       stock INTEGER NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     address_id INTEGER NOT NULL REFERENCES addresses(id), status TEXT NOT NULL,
                     created_day INTEGER NOT NULL, delivered_day INTEGER);
CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
                          product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL,
                          unit_price REAL NOT NULL);
CREATE TABLE refunds (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id INTEGER NOT NULL REFERENCES orders(id),
                      amount REAL NOT NULL, reason TEXT NOT NULL, day INTEGER NOT NULL);
CREATE TABLE escalations (id INTEGER PRIMARY KEY AUTOINCREMENT, customer_id INTEGER NOT NULL REFERENCES customers(id),
                          order_id INTEGER, reason TEXT NOT NULL);
"""
#: every table of the shop, in the schema's order
TABLES = tuple(re.findall(r"CREATE TABLE (\w+)", SCHEMA))

FIRST = ["Ana", "Ben", "Chloe", "Dev", "Elif", "Femi", "Greta", "Hiro", "Iris", "Jonas", "Kemal", "Lucia", "Mads", "Nora"]
LAST = ["Silva", "Okafor", "Novak", "Berg", "Rossi", "Tanaka", "Dubois", "Kowalski", "Meyer", "Haddad"]
CITIES = [("Lisbon", "Portugal"), ("Lyon", "France"), ("Ghent", "Belgium"), ("Turin", "Italy"), ("Leipzig", "Germany"),
          ("Malmo", "Sweden"), ("Cork", "Ireland"), ("Porto", "Portugal")]
STREETS = ["Oak Lane", "Harbour Road", "Mill Street", "Station Square", "Garden Row", "Bridge Street", "Elm Avenue"]
PRODUCTS = [("Trail Jacket", "apparel", 89.0), ("Rain Shell", "apparel", 74.0), ("Wool Beanie", "apparel", 19.0),
            ("Hiking Boots", "footwear", 129.0), ("Trail Runners", "footwear", 99.0), ("Camp Sandals", "footwear", 39.0),
            ("Day Pack", "bags", 59.0), ("Duffel Bag", "bags", 69.0), ("Hip Pack", "bags", 29.0),
            ("Head Torch", "gear", 35.0), ("Water Filter", "gear", 45.0), ("Camp Stove", "gear", 55.0)]


def create_database(path: str, seed: int) -> None:
    """A fresh shop database file at ``path``."""
    db = sqlite3.connect(path)
    populate(db, seed)
    db.close()


def populate(db: sqlite3.Connection, seed: int) -> None:
    """Create the schema and the seeded rows inside an open, empty database."""
    rng = random.Random(f"shop:{seed}")
    db.executescript(SCHEMA)
    for pid, (name, category, price) in enumerate(PRODUCTS, start=1):
        db.execute("INSERT INTO products VALUES (?, ?, ?, ?, ?)", (pid, name, category, price, rng.randint(0, 8)))
    names = rng.sample([f"{f} {l}" for f in FIRST for l in LAST], 8)
    order_id = 1000 + rng.randint(0, 50)
    item_id = 1
    for cid, name in enumerate(names, start=1):
        email = name.lower().replace(" ", ".") + "@mail.example"
        db.execute("INSERT INTO customers VALUES (?, ?, ?, ?)", (cid, name, email, rng.choice(["standard", "gold"])))
        city, country = rng.choice(CITIES)
        db.execute("INSERT INTO addresses VALUES (?, ?, ?, ?, ?)",
                   (cid, cid, f"{rng.randint(1, 99)} {rng.choice(STREETS)}", city, country))
        # every customer has one pending, one recently delivered and one long-delivered order, plus a random one
        statuses = ["pending", "delivered_recent", "delivered_old", rng.choice(["shipped", "cancelled", "delivered_recent"])]
        for status in statuses:
            created = TODAY - {"pending": 1, "shipped": 3, "cancelled": 8, "delivered_recent": 12, "delivered_old": 70}[status]
            delivered = {"delivered_recent": TODAY - rng.randint(2, 20), "delivered_old": TODAY - rng.randint(40, 60)}.get(status)
            db.execute("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)",
                       (order_id, cid, cid, status.split("_")[0], created, delivered))
            for pid in rng.sample(range(1, len(PRODUCTS) + 1), rng.randint(1, 2)):
                db.execute("INSERT INTO order_items VALUES (?, ?, ?, ?, ?)",
                           (item_id, order_id, pid, rng.randint(1, 2), PRODUCTS[pid - 1][2]))
                item_id += 1
            order_id += rng.randint(1, 3)
    db.commit()


# ---------------------------------------------------------------------------------------------
# Tools with the business rules


class Shop:
    """The tools, bound to one episode's database connection."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        db.row_factory = sqlite3.Row

    def _order(self, order_id: int) -> sqlite3.Row:
        row = self.db.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
        if row is None:
            raise ToolError(f"no order with id {order_id}")
        return row

    def order_total(self, order_id: int) -> float:
        value = self.db.execute("SELECT COALESCE(SUM(quantity * unit_price), 0) FROM order_items WHERE order_id = ?",
                                (order_id,)).fetchone()[0]
        return round(float(value), 2)

    def refunded(self, order_id: int) -> float:
        return round(float(self.db.execute("SELECT COALESCE(SUM(amount), 0) FROM refunds WHERE order_id = ?",
                                           (order_id,)).fetchone()[0]), 2)

    # read-only tools
    def find_customer(self, email: str) -> dict:
        row = self.db.execute("SELECT * FROM customers WHERE lower(email) = lower(?)", (email.strip(),)).fetchone()
        if row is None:
            raise ToolError(f"no customer with email {email!r}")
        return dict(row)

    def list_orders(self, customer_id: int) -> list[dict]:
        rows = self.db.execute("SELECT id, status, created_day, delivered_day FROM orders WHERE customer_id = ? ORDER BY id",
                               (customer_id,)).fetchall()
        if not rows and self.db.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
            raise ToolError(f"no customer with id {customer_id}")
        return [{**dict(r), "total": self.order_total(r["id"])} for r in rows]

    def get_order(self, order_id: int) -> dict:
        order = dict(self._order(order_id))
        items = self.db.execute("SELECT oi.product_id, p.name, p.category, oi.quantity, oi.unit_price FROM order_items oi "
                                "JOIN products p ON p.id = oi.product_id WHERE oi.order_id = ?", (order_id,)).fetchall()
        address = self.db.execute("SELECT line, city, country FROM addresses WHERE id = ?", (order["address_id"],)).fetchone()
        return {**order, "items": [dict(i) for i in items], "total": self.order_total(order_id),
                "refunded": self.refunded(order_id), "shipping_address": dict(address), "today": TODAY}

    def search_products(self, query: str) -> list[dict]:
        rows = self.db.execute("SELECT * FROM products WHERE lower(name) LIKE ? OR lower(category) LIKE ?",
                               (f"%{query.lower()}%", f"%{query.lower()}%")).fetchall()
        return [dict(r) for r in rows]

    # tools that change the database
    def cancel_order(self, order_id: int) -> str:
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ToolError(f"order {order_id} is {order['status']}; only pending orders can be cancelled")
        self.db.execute("UPDATE orders SET status = 'cancelled' WHERE id = ?", (order_id,))
        return f"order {order_id} cancelled"

    def update_address(self, order_id: int, line: str, city: str, country: str) -> str:
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ToolError(f"order {order_id} is {order['status']}; the address can only change before shipping")
        self.db.execute("UPDATE addresses SET line = ?, city = ?, country = ? WHERE id = ?",
                        (line.strip(), city.strip(), country.strip(), order["address_id"]))
        return f"shipping address of order {order_id} updated"

    def issue_refund(self, order_id: int, amount: float, reason: str) -> str:
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ToolError(f"order {order_id} is {order['status']}; only delivered orders can be refunded")
        if TODAY - order["delivered_day"] > REFUND_WINDOW_DAYS:
            raise ToolError(f"order {order_id} was delivered {TODAY - order['delivered_day']} days ago; "
                            f"the refund window is {REFUND_WINDOW_DAYS} days")
        remaining = round(self.order_total(order_id) - self.refunded(order_id), 2)
        amount = round(amount, 2)
        if not 0 < amount <= remaining + 1e-9:
            raise ToolError(f"the refund must be between 0 and the {remaining} not yet refunded")
        self.db.execute("INSERT INTO refunds (order_id, amount, reason, day) VALUES (?, ?, ?, ?)",
                        (order_id, amount, reason, TODAY))
        return f"refunded {amount:.2f} on order {order_id}"

    def exchange_item(self, order_id: int, product_id: int, new_product_id: int) -> str:
        order = self._order(order_id)
        if order["status"] != "delivered" or TODAY - order["delivered_day"] > REFUND_WINDOW_DAYS:
            raise ToolError(f"order {order_id} cannot be exchanged: only delivered orders within {REFUND_WINDOW_DAYS} days")
        item = self.db.execute("SELECT * FROM order_items WHERE order_id = ? AND product_id = ?", (order_id, product_id)).fetchone()
        if item is None:
            raise ToolError(f"order {order_id} has no product {product_id}")
        old = self.db.execute("SELECT * FROM products WHERE id = ?", (product_id,)).fetchone()
        new = self.db.execute("SELECT * FROM products WHERE id = ?", (new_product_id,)).fetchone()
        if new is None:
            raise ToolError(f"no product with id {new_product_id}")
        if new["category"] != old["category"] or new["price"] != old["price"] and new["price"] > old["price"]:
            raise ToolError("exchanges must be for a product of the same category that costs no more")
        if new["stock"] < item["quantity"]:
            raise ToolError(f"{new['name']} has only {new['stock']} in stock")
        self.db.execute("UPDATE order_items SET product_id = ? WHERE id = ?", (new_product_id, item["id"]))
        self.db.execute("UPDATE products SET stock = stock - ? WHERE id = ?", (item["quantity"], new_product_id))
        self.db.execute("UPDATE products SET stock = stock + ? WHERE id = ?", (item["quantity"], product_id))
        return f"exchanged product {product_id} for {new_product_id} on order {order_id}"

    def escalate(self, customer_id: int, reason: str, order_id: int | None = None) -> str:
        if self.db.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
            raise ToolError(f"no customer with id {customer_id}")
        if order_id is not None:
            self._order(order_id)
        self.db.execute("INSERT INTO escalations (customer_id, order_id, reason) VALUES (?, ?, ?)", (customer_id, order_id, reason))
        return "escalated to a human agent"


class EmailArgs(BaseModel):
    email: str = Field(min_length=3, max_length=200)


#: SQLite integers are 64-bit: larger ids are refused by the schema, not by an OverflowError
Id = Annotated[int, Field(ge=0, le=2**63 - 1)]
#: money in the shop's currency: finite, at least a cent (1e-300 is not a refund), at most a million
Amount = Annotated[float, Field(ge=0.01, le=1_000_000, allow_inf_nan=False)]


class CustomerArgs(BaseModel):
    customer_id: Id


class OrderArgs(BaseModel):
    order_id: Id


class QueryArgs(BaseModel):
    query: str = Field(min_length=1, max_length=200)


class AddressArgs(BaseModel):
    order_id: Id
    line: str = Field(min_length=1, max_length=200)
    city: str = Field(min_length=1, max_length=100)
    country: str = Field(min_length=1, max_length=100)


class RefundArgs(BaseModel):
    order_id: Id
    amount: Amount
    reason: str = Field(min_length=1, max_length=500)


class ExchangeArgs(BaseModel):
    order_id: Id
    product_id: Id
    new_product_id: Id


class EscalateArgs(BaseModel):
    customer_id: Id
    reason: str = Field(min_length=1, max_length=500)
    order_id: Id | None = None


def shop_tools(shop_getter: Callable[[], Shop]) -> dict[str, Tool]:
    """The tools, calling whatever shop (episode database) ``shop_getter`` returns."""
    import json

    def wrap(method: str, fields: tuple[str, ...]):
        def run(args):
            result = getattr(shop_getter(), method)(**{f: getattr(args, f) for f in fields})
            return result if isinstance(result, str) else json.dumps(result)
        return run

    specs = [
        ("find_customer", "Look up a customer by email address.", EmailArgs, ("email",)),
        ("list_orders", "List a customer's orders (id, status, days, total).", CustomerArgs, ("customer_id",)),
        ("get_order", "Get an order with its items, total, refunded amount and shipping address.", OrderArgs, ("order_id",)),
        ("search_products", "Search products by name or category.", QueryArgs, ("query",)),
        ("cancel_order", "Cancel an order that has not shipped yet (status pending).", OrderArgs, ("order_id",)),
        ("update_address", "Change the shipping address of a pending order.", AddressArgs, ("order_id", "line", "city", "country")),
        ("issue_refund", f"Refund part or all of a delivered order, within {REFUND_WINDOW_DAYS} days of delivery.", RefundArgs,
         ("order_id", "amount", "reason")),
        ("exchange_item", "Exchange a product of a delivered order (within the refund window) for another of the same "
         "category that costs no more and is in stock.", ExchangeArgs, ("order_id", "product_id", "new_product_id")),
        ("escalate", "Hand the case to a human agent (when the request breaks a rule or needs a person).", EscalateArgs,
         ("customer_id", "reason", "order_id")),
    ]
    return {name: Tool(name, description, model, wrap(name, fields)) for name, description, model, fields in specs}


# ---------------------------------------------------------------------------------------------
# Tasks: an instruction and the goal state, built by applying the correct calls to the seed DB

@dataclass
class ShopTask:
    id: str
    seed: int
    kind: str
    instruction: str
    solution: list[tuple[str, dict[str, Any]]]
    """The correct mutating calls (the env never shows them to the agent)."""
    tables: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)


KINDS = ("cancel", "refund", "address", "exchange", "refund_expired", "escalate", "cancel_and_address")


def make_task(index: int, split: str = "train") -> ShopTask:
    """Task ``index``: its kind cycles through KINDS; its database seed is its own."""
    kind = KINDS[index % len(KINDS)]
    seed = index * 7919 + (0 if split == "train" else 1_000_003)
    db = sqlite3.connect(":memory:")
    populate(db, seed)
    shop = Shop(db)
    rng = random.Random(f"task:{split}:{index}")
    customer = dict(db.execute("SELECT * FROM customers WHERE id = ?", (rng.randint(1, 8),)).fetchone())
    orders = {o["status"] if o["status"] != "delivered" else ("delivered_recent" if TODAY - o["delivered_day"] <= REFUND_WINDOW_DAYS
              else "delivered_old"): o for o in shop.list_orders(customer["id"])}
    who = f"Hi, this is {customer['name']} ({customer['email']})."
    task_id = f"shop-{split}-{index}"
    if kind == "cancel":
        order = orders["pending"]["id"]
        return ShopTask(task_id, seed, kind, f"{who} Please cancel my order {order}, I no longer need it.",
                        [("cancel_order", {"order_id": order})], ("orders",), {"order_id": order})
    if kind == "address":
        order = orders["pending"]["id"]
        city, country = rng.choice([c for c in CITIES])
        line = f"{rng.randint(100, 199)} {rng.choice(STREETS)}"
        return ShopTask(task_id, seed, kind, f"{who} I moved. Please send order {order} to {line}, {city}, {country}.",
                        [("update_address", {"order_id": order, "line": line, "city": city, "country": country})],
                        ("addresses",), {"order_id": order, "line": line, "city": city, "country": country})
    if kind in ("refund", "exchange", "refund_expired", "escalate"):
        key = "delivered_old" if kind == "refund_expired" else "delivered_recent"
        order_id = orders[key]["id"]
        item = shop.get_order(order_id)["items"][0]
        if kind == "refund":
            amount = round(item["unit_price"] * item["quantity"], 2)
            return ShopTask(task_id, seed, kind, f"{who} The {item['name']} in order {order_id} arrived damaged. "
                            f"Please refund it ({amount:.2f} euros).",
                            [("issue_refund", {"order_id": order_id, "amount": amount, "reason": "damaged item"})],
                            ("refunds",), {"order_id": order_id, "amount": amount})
        if kind == "refund_expired":
            return ShopTask(task_id, seed, kind, f"{who} I want a full refund for order {order_id}. If you cannot do it, "
                            "pass my case to a person.",
                            [("escalate", {"customer_id": customer["id"], "order_id": order_id, "reason": "refund outside window"})],
                            ("refunds", "escalations"), {"order_id": order_id, "customer_id": customer["id"]})
        if kind == "escalate":
            return ShopTask(task_id, seed, kind, f"{who} I am unhappy with how order {order_id} was handled and want to "
                            "talk to a human, please.",
                            [("escalate", {"customer_id": customer["id"], "order_id": order_id, "reason": "customer request"})],
                            ("escalations",), {"order_id": order_id, "customer_id": customer["id"]})
        # exchange: the cheapest in-stock product of the same category that costs no more
        options = db.execute("SELECT * FROM products WHERE category = ? AND id != ? AND price <= ? AND stock >= ? "
                             "ORDER BY price, id", (item["category"], item["product_id"], item["unit_price"],
                                                    item["quantity"])).fetchall()
        if not options:  # nothing to swap to: the right move is to escalate
            return ShopTask(task_id, seed, "escalate", f"{who} Please exchange the {item['name']} in order {order_id}; "
                            "if no exchange is possible, get a person to help me.",
                            [("escalate", {"customer_id": customer["id"], "order_id": order_id, "reason": "no exchange"})],
                            ("order_items", "products", "escalations"), {"order_id": order_id, "customer_id": customer["id"]})
        new = dict(options[0])
        return ShopTask(task_id, seed, kind, f"{who} Please exchange the {item['name']} in order {order_id} for the "
                        f"{new['name']}.", [("exchange_item", {"order_id": order_id, "product_id": item["product_id"],
                                                               "new_product_id": new["id"]})],
                        ("order_items", "products"), {"order_id": order_id, "product_id": item["product_id"],
                                                      "new_product_id": new["id"]})
    # cancel_and_address: two requests in one message
    pending = orders["pending"]["id"]
    other = orders.get("shipped", orders["delivered_recent"])["id"]
    return ShopTask(task_id, seed, kind, f"{who} Please cancel order {pending}. Also, can you change the address of order "
                    f"{other} to 5 Mill Street, Cork, Ireland? If that one cannot be changed any more, leave it as it is.",
                    [("cancel_order", {"order_id": pending})], ("orders", "addresses"), {"order_id": pending, "other": other})


def table_state(db: sqlite3.Connection, table: str) -> list[tuple]:
    """Rows of ``table`` for comparison (free-text reasons and autoincrement ids left out)."""
    columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
    keep = [c for c in columns if c not in ("reason",) and not (table in ("refunds", "escalations") and c == "id")]
    return sorted(tuple(row) for row in db.execute(f"SELECT {', '.join(keep)} FROM {table}"))

"""Synthetic users for ``traceless audit``: a few short sessions of ordinary personal
facts per user, generated from a seed (no real data needed)."""

from __future__ import annotations

import numpy as np

from traceless.memory import Session, Turn

__all__ = ["synthetic_users"]

_NAMES = ["Alex", "Sam", "Priya", "Jonas", "Mei", "Carlos", "Amara", "Lena", "Tomas", "Yuki", "Omar", "Ines"]
_CITIES = ["Lisbon", "Osaka", "Denver", "Leeds", "Nairobi", "Tallinn", "Austin", "Porto", "Utrecht", "Hobart"]
_JOBS = ["nurse", "data engineer", "high-school teacher", "carpenter", "pharmacist", "game designer",
         "accountant", "marine biologist", "chef", "bus driver"]
_PETS = ["a grey cat called Miso", "a beagle named Pepper", "two goldfish", "a parrot called Kiwi",
         "a rescue greyhound named Dash", "a tortoise called Shelly"]
_HOBBIES = ["bouldering", "sourdough baking", "trail running", "watercolour painting", "chess",
            "birdwatching", "salsa dancing", "woodworking"]
_FOODS = ["spicy ramen", "mushroom risotto", "fish tacos", "lentil curry", "margherita pizza", "pad thai"]
_PLANS = ["a trip to Iceland in March", "running a half marathon in the autumn", "learning Spanish",
          "repainting the kitchen", "visiting my sister in Toronto", "buying a used electric car"]

_SESSION_1 = [
    "Hi! I'm {name}, I live in {city} and work as a {job}.",
    "I have {pet}, so I need advice on pet-friendly weekend activities.",
    "My favourite dinner is {food}; can you suggest a quick variation?",
]
_SESSION_2 = [
    "I've been getting into {hobby} lately. Any tips for a beginner?",
    "I'm also planning {plan}. What should I prepare first?",
    "Thanks, that helps. Remind me to keep my budget under control.",
]
_ASSISTANT = "Sure, here is a short answer with a few practical suggestions."


def synthetic_users(n: int, rng: np.random.Generator) -> list[list[Session]]:
    """``n`` users, each with two sessions of three user turns (plus short assistant turns)."""
    users: list[list[Session]] = []
    for u in range(n):
        def pick(xs: list[str]) -> str:
            return xs[int(rng.integers(0, len(xs)))]

        facts = {"name": pick(_NAMES), "city": pick(_CITIES), "job": pick(_JOBS), "pet": pick(_PETS),
                 "hobby": pick(_HOBBIES), "food": pick(_FOODS), "plan": pick(_PLANS)}
        sessions = []
        for si, tmpl in enumerate((_SESSION_1, _SESSION_2)):
            turns: list[Turn] = []
            for line in tmpl:
                turns.append(Turn(role="user", content=line.format(**facts)))
                turns.append(Turn(role="assistant", content=_ASSISTANT))
            sessions.append(Session(user_id=f"user-{u:03d}", session_id=f"s{si + 1}",
                                    date=f"2026/0{si + 1}/1{u % 10}", turns=turns))
        users.append(sessions)
    return users

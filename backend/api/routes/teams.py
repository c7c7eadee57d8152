"""Teams: create, list, show; invite, re-role and remove members; delete.

Roles: `owner` manages the team, `member` shares and changes the team's work, `viewer` only
reads it. People outside a team get 404 for it, as if it did not exist. A team's name is unique
among the teams its creator made, not globally, so that creating a team reveals nothing about
the names other people chose.

A team always keeps an owner: the last one can neither step down nor leave, and owners changing
each other's roles at once are taken in turn. Deleting a team is confirmed by naming it
(`DELETE /teams/{id}?confirm=<name>`), so a co-owner's slip (or a replayed request) does not
delete it. Open choice: owners are equals, whoever made the team. Any owner may delete the team,
and any owner may remove any member, another owner or the team's creator included, while an
owner remains: making someone an owner is trusting them with the team, and a creator who could
not be removed would make a team depend on one account that may leave the organisation. A
removed creator keeps their own experiments (still the team's, as any removed member's).

Membership is by invitation: an owner invites an email with a role, and the person with that
email sees the invitation (`GET /invitations`) and accepts or declines it. Inviting answers
the same whether or not an account has the email, so it tells nobody who has an account.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from backend.api.access import (
    MyInvitation,
    TeamMember,
    TeamOwner,
    TeamOwnerOrLeaving,
    field_error,
    membership,
)
from backend.api.deps import DbSession
from backend.api.security import CurrentUser
from backend.auth.users import normalise_email
from backend.db.models import Team, TeamInvitation, TeamMembership, User

router = APIRouter(prefix="/teams", tags=["teams"])
invitations_router = APIRouter(prefix="/invitations", tags=["teams"])

Role = Literal["owner", "member", "viewer"]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TeamIn(_In):
    name: str = Field(min_length=1, max_length=120)


class InvitationIn(_In):
    email: str = Field(min_length=3, max_length=254, description="whom to invite")
    role: Role = "member"


class RoleIn(_In):
    role: Role


class MemberOut(BaseModel):
    user_id: int
    email: str
    display_name: str
    role: str


class InvitationOut(BaseModel):
    id: int
    team_id: int
    team_name: str
    email: str
    role: str
    invited_by: int | None
    created_at: datetime


class TeamOut(BaseModel):
    id: int
    name: str
    created_at: datetime
    role: str = Field(description="your role in the team")
    members: list[MemberOut]


def _out(db: Session, team: Team, role: str) -> TeamOut:
    rows = db.execute(
        select(User.id, User.email, User.display_name, TeamMembership.role)
        .join(TeamMembership, TeamMembership.user_id == User.id)
        .where(TeamMembership.team_id == team.id)
        .order_by(User.id)
    )
    members = [
        MemberOut(user_id=r.id, email=r.email, display_name=r.display_name, role=r.role)
        for r in rows
    ]
    return TeamOut(
        id=team.id, name=team.name, created_at=team.created_at, role=role, members=members
    )


def _owners(db: Session, team_id: int) -> int:
    """How many owners the team has, their memberships locked (on PostgreSQL) until the
    request commits: two owners demoting or removing each other at once are taken in turn, so
    the second sees the first's change and a team always keeps an owner."""
    owners = db.scalars(
        select(TeamMembership.id)
        .where(TeamMembership.team_id == team_id, TeamMembership.role == "owner")
        .order_by(TeamMembership.id)
        .with_for_update()
    )
    return len(list(owners))


@router.post("", response_model=TeamOut, status_code=status.HTTP_201_CREATED)
def create_team(body: TeamIn, db: DbSession, user: CurrentUser) -> TeamOut:
    """Create a team; you become its owner. Names are unique among the teams you made (others
    may use the same name: teams are told apart by id)."""
    name = body.name.strip()
    if not name:
        raise field_error("name", "must not be blank")
    taken = field_error("name", f"you already made a team named '{name}'; choose another name")
    if db.scalar(select(Team.id).where(Team.created_by == user.id, Team.name == name)):
        raise taken
    team = Team(name=name, created_by=user.id)
    db.add(team)
    try:
        db.flush()
    except IntegrityError:  # the same name, by the same person, at the same moment
        db.rollback()
        raise taken from None
    db.add(TeamMembership(team_id=team.id, user_id=user.id, role="owner"))
    db.commit()
    return _out(db, team, "owner")


@router.get("", response_model=list[TeamOut])
def list_teams(db: DbSession, user: CurrentUser) -> list[TeamOut]:
    """The teams you belong to, with your role."""
    rows = db.execute(
        select(Team, TeamMembership.role)
        .join(TeamMembership, TeamMembership.team_id == Team.id)
        .where(TeamMembership.user_id == user.id)
        .order_by(Team.name)
    ).all()
    return [_out(db, team, role) for team, role in rows]


@router.get("/{team_id}", response_model=TeamOut)
def show_team(member: TeamMember, db: DbSession) -> TeamOut:
    return _out(db, member.team, member.role)


@router.delete(
    "/{team_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={422: {"description": "`confirm` is missing or is not the team's name"}},
)
def delete_team(
    owner: TeamOwner,
    db: DbSession,
    confirm: Annotated[
        str, Query(max_length=120, description="the team's name, to confirm the deletion")
    ],
) -> Response:
    """Delete the team (owners only), confirmed by naming it: `?confirm=<the team's name>`.
    Its work stays with the people who made it."""
    if confirm.strip() != owner.team.name:
        raise RequestValidationError(
            [
                {
                    "loc": ("query", "confirm"),
                    "msg": "must be the team's name, to confirm deleting it",
                    "type": "value_error",
                }
            ]
        )
    db.delete(owner.team)
    db.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _invitation_out(invitation: TeamInvitation) -> InvitationOut:
    return InvitationOut(
        id=invitation.id,
        team_id=invitation.team_id,
        team_name=invitation.team.name,
        email=invitation.email,
        role=invitation.role,
        invited_by=invitation.invited_by,
        created_at=invitation.created_at,
    )


@router.post(
    "/{team_id}/members", response_model=InvitationOut, status_code=status.HTTP_201_CREATED
)
def invite_member(
    owner: TeamOwner, body: InvitationIn, db: DbSession, user: CurrentUser
) -> InvitationOut:
    """Invite an email to the team with a role (owners only); it joins when it accepts.
    The answer is the same whether or not an account has this email; inviting again
    changes the role offered."""
    team_id = owner.team_id
    email = normalise_email(body.email)
    if "@" not in email:
        raise field_error("email", "must be an email address")
    members = select(User.email).join(TeamMembership).where(TeamMembership.team_id == team_id)
    if email in {address.lower() for address in db.scalars(members)}:
        raise field_error("email", "this person is already a member; change the role instead")
    invitation = db.scalar(
        select(TeamInvitation).where(
            TeamInvitation.team_id == team_id, TeamInvitation.email == email
        )
    )
    if invitation is None:
        invitation = TeamInvitation(team_id=team_id, email=email)
        db.add(invitation)
    invitation.role, invitation.invited_by = body.role, user.id
    db.commit()
    db.refresh(invitation)
    return _invitation_out(invitation)


@router.get("/{team_id}/invitations", response_model=list[InvitationOut])
def team_invitations(owner: TeamOwner, db: DbSession) -> list[InvitationOut]:
    """The team's pending invitations (owners only)."""
    rows = db.scalars(
        select(TeamInvitation)
        .where(TeamInvitation.team_id == owner.team_id)
        .order_by(TeamInvitation.id)
    )
    return [_invitation_out(invitation) for invitation in rows]


@router.delete("/{team_id}/invitations/{invitation_id}", status_code=status.HTTP_204_NO_CONTENT)
def withdraw_invitation(owner: TeamOwner, invitation_id: int, db: DbSession) -> Response:
    """Withdraw a pending invitation (owners only)."""
    invitation = db.scalar(
        select(TeamInvitation).where(
            TeamInvitation.id == invitation_id, TeamInvitation.team_id == owner.team_id
        )
    )
    if invitation is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"invitation {invitation_id} not found")
    db.delete(invitation)
    db.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.patch("/{team_id}/members/{user_id}", response_model=TeamOut)
def change_role(owner: TeamOwner, user_id: int, body: RoleIn, db: DbSession) -> TeamOut:
    """Change a member's role (owners only); a team keeps at least one owner."""
    team_id = owner.team_id
    target = membership(db, team_id, user_id)
    if target is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"user {user_id} is not in team {team_id}")
    if target.role == "owner" and body.role != "owner" and _owners(db, team_id) == 1:
        raise field_error(
            "role", "the team's last owner cannot step down; make another owner first"
        )
    target.role = body.role
    db.commit()
    db.refresh(owner)
    return _out(db, owner.team, owner.role)


@router.delete("/{team_id}/members/{user_id}", status_code=status.HTTP_204_NO_CONTENT)
def remove_member(remover: TeamOwnerOrLeaving, user_id: int, db: DbSession) -> Response:
    """Remove a member (owners), or leave the team yourself; a team keeps at least one owner."""
    team_id = remover.team_id
    target = membership(db, team_id, user_id)
    if target is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"user {user_id} is not in team {team_id}")
    if target.role == "owner" and _owners(db, team_id) == 1:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            "the team's last owner cannot leave; make another owner first or delete the team",
        )
    db.delete(target)
    db.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@invitations_router.get("", response_model=list[InvitationOut])
def my_invitations(db: DbSession, user: CurrentUser) -> list[InvitationOut]:
    """Invitations to teams addressed to your email, waiting for your answer."""
    rows = db.scalars(
        select(TeamInvitation)
        .where(TeamInvitation.email == normalise_email(user.email))
        .order_by(TeamInvitation.id)
    )
    return [_invitation_out(invitation) for invitation in rows]


@invitations_router.post("/{invitation_id}/accept", response_model=TeamOut)
def accept_invitation(invitation: MyInvitation, db: DbSession, user: CurrentUser) -> TeamOut:
    """Join the team with the role you were invited to."""
    team, role = invitation.team, invitation.role
    if membership(db, team.id, user.id) is None:
        db.add(TeamMembership(team_id=team.id, user_id=user.id, role=role))
    db.delete(invitation)
    db.commit()
    joined = membership(db, team.id, user.id)
    assert joined is not None
    return _out(db, team, joined.role)


@invitations_router.post("/{invitation_id}/decline", status_code=status.HTTP_204_NO_CONTENT)
def decline_invitation(invitation: MyInvitation, db: DbSession) -> Response:
    """Say no: the invitation is gone, and the team's owners may invite you again."""
    db.delete(invitation)
    db.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)

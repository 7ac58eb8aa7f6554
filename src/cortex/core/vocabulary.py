"""The words hot topics leave out or weigh down: stop words, tool vocabulary, filler, generic
words, and the directory names that hold projects rather than name them."""

from __future__ import annotations

ENGLISH_STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn doing
    don down during each else etc even ever every few for from further get gets got had hadn has
    hasn have haven having he her here hers herself him himself his how however i if in into is
    isn it its itself just let like may me might more most much must mustn my myself need no nor
    not now of off on once one only or other our ours ourselves out over own per please same
    shall shan she should shouldn since so some such than that the their theirs them themselves
    then there these they this those though through thus to too under until up upon us very via
    was wasn we were weren what when where whether which while who whom whose why will with
    within without won would wouldn yes yet you your yours yourself yourselves e.g i.e ok okay
    """.split()
)
TOOL_STOPWORDS = frozenset(
    """
    exec read write edit multiedit tool tools file files path paths bash shell grep glob sed awk
    echo sudo mkdir chmod cmd command stdout stderr args params param webfetch websearch
    todowrite notebookedit http https www com true false null none self home users usr tmp var
    opt mnt bin lib src projects repos workspace workspaces
    """.split()
)
FILLER_WORDS = frozenset(
    """
    hey hi hello thanks thank wow cool great awesome amazing nice good glad sure yeah yep yup
    nope hmm haha lol sorry welcome fine absolutely definitely totally exactly indeed oh ah
    really actually basically literally pretty quite rather super still already always never
    often sometimes usually maybe perhaps probably anyway lot lots bit kind sort anything
    something everything nothing someone anyone everyone things stuff way ways time times
    day days today tomorrow yesterday week weeks year years moment people person guys
    go goes going went gone come comes coming came gets getting make makes making made take
    takes taking took taken give gives giving gave given keep keeps keeping kept put puts
    putting say says saying said tell tells telling told know knows knowing knew known think
    thinks thinking thought feel feels feeling felt see sees seeing saw seen look looks
    looking looked want wants wanting wanted try tries trying tried use uses using used move
    moves moving moved pass passes passing passed raise raises raising raised seem seems
    seemed mean means meant love loves loving loved likes liked hope hopes hoping hoped
    sound sounds sounded happen happens happened let lets done doing went bring brought
    find finds found show shows showed shown call called calls start starts started
    stop stopped stops wait waiting waited leave left able different big small little old
    long short whole real last next first second another many several lots special
    important excited happy fun glad
    dev main master trunk develop
    """.split()
)
"""Words that fill sentences in any conversation: never a topic on their own."""
DEFAULT_STOPWORDS = ENGLISH_STOPWORDS | TOOL_STOPWORDS | FILLER_WORDS

GENERIC_WORDS = frozenset(
    """
    add added change changes check code data error errors example fix fixed function help issue
    issues line lines make new output result results run running thing things update updated
    use used using value values want work working
    """.split()
)

PROJECT_CONTAINERS = frozenset(
    "projects repos repositories src code dev work workspace workspaces git".split()
)
SYSTEM_DIRS = frozenset("~ home users root tmp temp var usr opt mnt srv private etc".split())
BROADCAST = frozenset({"all", "*", "everyone", "broadcast"})

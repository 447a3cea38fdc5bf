/**
 * The everyday questions of the answers benchmark (answers.bench.ts): what a newcomer asks a voice
 * avatar first. Each is checked by rule (check.ts), never by another model:
 *  - a fact question lists the facts a right answer contains, one regex each, with the accepted
 *    variants as alternatives (digits or words, either unit); all must match, and `not` (a wrong
 *    answer that would still contain them) must not;
 *  - an advice question lists what an answer on topic mentions (words of the advice itself, not
 *    the question's own words, which an answer can echo without advising anything); any one will do.
 * Every question carries a right answer written out (`example`), which test/benchmarks/answers-check.test.ts
 * feeds to the checker, so a rule that refuses a right answer fails there, not in a bench run.
 */

export type Topic = 'geography' | 'science' | 'history' | 'arithmetic' | 'definition' | 'conversion' | 'advice';

export interface Question {
  topic: Topic;
  question: string;
  /** Fact questions: every regex must match. Advice: any one must (the answer is on topic). */
  facts: RegExp[];
  /** A wrong answer that would pass `facts` (e.g. "nine planets" beside "eight"). */
  not?: RegExp;
  /** A right, spoken-style answer of at most two sentences: the checker must accept it. */
  example: string;
}

const q = (topic: Topic, question: string, facts: RegExp[], example: string, not?: RegExp): Question => ({ topic, question, facts, example, ...(not ? { not } : {}) });

export const QUESTIONS: Question[] = [
  // Geography.
  q('geography', 'What is the capital of France?', [/\bParis\b/i], 'The capital of France is Paris.'),
  q('geography', 'What is the tallest mountain in the world?', [/\bEverest\b|Chomolungma|Sagarmatha/i], 'Mount Everest, at about 8,849 metres.', /\b8,?8\d\d\s*(?:feet|ft)\b/i), // its height in metres called feet
  q('geography', 'What is the largest ocean on Earth?', [/\bPacific\b/i], 'The Pacific Ocean is the largest.'),
  q('geography', 'What is the longest river in the world?', [/\bNile\b|\bAmazon\b/i], 'The Nile is usually called the longest, though some measure the Amazon as longer.'),
  q('geography', 'What is the capital of Japan?', [/\bTokyo\b/i], "Tokyo is Japan's capital."),
  q('geography', 'What is the largest country in the world by area?', [/\bRussia/i], 'Russia is the largest country by area.'),
  q('geography', 'What is the capital of Australia?', [/\bCanberra\b/i], 'The capital of Australia is Canberra, not Sydney.'),
  q('geography', 'On which continent is Egypt?', [/\bAfrica\b/i], 'Egypt is in Africa, in its north-east corner.'),
  q('geography', 'What is the capital of Canada?', [/\bOttawa\b/i], 'Ottawa is the capital of Canada.'),
  q('geography', 'How many continents are there?', [/\bseven\b|\b7\b/i], 'There are seven continents.'),
  // Science.
  q(
    'science',
    'At what temperature does water boil at sea level?',
    [/\b100\s*(?:°|degrees?|º)?\s*(?:C\b|Celsius|centigrade)|\b212\s*(?:°|degrees?|º)?\s*(?:F\b|Fahrenheit)|\bone hundred degrees\b/i],
    'Water boils at 100 degrees Celsius, or 212 Fahrenheit, at sea level.',
  ),
  q('science', 'What is the chemical symbol for gold?', [/\bAu\b/], 'The chemical symbol for gold is Au.'),
  q('science', 'How many planets are in our solar system?', [/\beight\b|\b8\b/i], 'There are eight planets in our solar system.', /\b(?:nine|9) planets\b/i),
  q('science', 'What gas do plants absorb from the air?', [/carbon dioxide|\bCO2\b|CO₂/i], 'Plants take in carbon dioxide from the air.'),
  q('science', 'What is the closest star to Earth?', [/\b(?:the )?Sun\b|Proxima Centauri/i], 'The Sun is the closest star to Earth.'),
  q('science', 'What is the freezing point of water in Fahrenheit?', [/\b32\b|thirty-two/i], 'Water freezes at 32 degrees Fahrenheit.', /\b(?:32|thirty-two)\s*(?:°|degrees?)?\s*(?:C\b|Celsius)/i),
  q('science', 'What planet is known as the Red Planet?', [/\bMars\b/i], 'Mars is called the Red Planet.'),
  q('science', 'How many bones are in the adult human body?', [/\b206\b|two hundred (?:and )?six/i], 'An adult human has 206 bones.'),
  q('science', 'What is the speed of light?', [/\b299[,. ]?792\b|\b300[,. ]?000\s*(?:km|kilomet)|\b186[,. ]?000\s*miles|\b3\s*(?:×|x|\*)\s*10\^?8|\b300 million met(?:er|re)s|\bone billion kilomet/i], 'Light travels at about 300,000 kilometres per second.'),
  // History.
  q('history', 'Who was the first president of the United States?', [/\bWashington\b/i], 'George Washington was the first president of the United States.'),
  q('history', 'In what year did World War II end?', [/\b1945\b/], 'World War II ended in 1945.'),
  q('history', 'Who wrote Romeo and Juliet?', [/\bShakespeare\b/i], 'William Shakespeare wrote Romeo and Juliet.'),
  q('history', 'Who painted the Mona Lisa?', [/\bLeonardo\b|\bda Vinci\b/i], 'Leonardo da Vinci painted the Mona Lisa.'),
  q('history', 'Who was the first person to walk on the Moon?', [/\bArmstrong\b/i], 'Neil Armstrong, in July 1969.'),
  q('history', 'In what year did the Titanic sink?', [/\b1912\b/], 'The Titanic sank in April 1912.'),
  q('history', 'Who discovered penicillin?', [/\bFleming\b/i], 'Alexander Fleming discovered penicillin in 1928.'),
  q('history', 'In which year did the Berlin Wall fall?', [/\b1989\b/], 'The Berlin Wall fell in 1989.'),
  // Arithmetic.
  q('arithmetic', 'What is 7 times 8?', [/\b56\b|fifty-six/i], 'Seven times eight is 56.'),
  q('arithmetic', 'What is 15 plus 27?', [/\b42\b|forty-two/i], '15 plus 27 is 42.'),
  q('arithmetic', 'What is 100 divided by 4?', [/\b25\b|twenty-five/i], '100 divided by 4 is 25.'),
  q('arithmetic', 'What is the square root of 81?', [/\b9\b|\bnine\b/i], 'The square root of 81 is 9.'),
  q('arithmetic', 'What is 12 minus 5?', [/\b7\b|\bseven\b/i], '12 minus 5 is 7.'),
  q('arithmetic', 'What is 10 percent of 250?', [/\b25\b|twenty-five/i], 'Ten percent of 250 is 25.'),
  // Definitions.
  q('definition', 'What is photosynthesis?', [/\blight\b|sunlight/i, /\benergy\b|sugar|glucose|\bfood\b/i], 'Photosynthesis is how plants use sunlight to turn water and carbon dioxide into sugar and oxygen.'),
  q('definition', 'What does a thermometer measure?', [/\btemperature\b/i], 'A thermometer measures temperature.'),
  q('definition', 'What is a noun?', [/\b(?:person|people|place|thing|idea|object)s?\b/i], 'A noun is a word that names a person, place, thing or idea.'),
  q('definition', 'What is gravity?', [/\bforce\b/i, /attract|pull|mass/i], 'Gravity is the force that pulls objects with mass toward each other.'),
  q('definition', 'What is an atom?', [/smallest|basic|building block|\bunit\b/i, /matter|element|proton|electron|nucleus/i], 'An atom is the smallest unit of a chemical element: a nucleus with electrons around it.'),
  q('definition', 'What does DNA stand for?', [/deoxyribonucleic acid/i], 'DNA stands for deoxyribonucleic acid.'),
  // Conversions.
  q('conversion', 'How many centimeters are in a meter?', [/\b100\b|\bhundred\b/i], 'There are 100 centimeters in a meter.'),
  q('conversion', 'How many minutes are in an hour?', [/\b60\b|\bsixty\b/i], 'An hour has sixty minutes.'),
  q('conversion', 'How many feet are in a mile?', [/\b5,?280\b|five thousand,? two hundred (?:and )?eighty/i], 'A mile is 5,280 feet.'),
  q('conversion', 'How many days are in a leap year?', [/\b366\b|three hundred (?:and )?sixty-six/i], 'A leap year has 366 days.'),
  q('conversion', 'How many grams are in a kilogram?', [/\b1,?000\b|\bthousand\b/i], 'There are 1,000 grams in a kilogram.'),
  q('conversion', 'How many inches are in a foot?', [/\b12\b|\btwelve\b/i], 'A foot is twelve inches.'),
  q('conversion', 'What is 10 kilometers in miles?', [/\b6\.2(?:1\d*)?\b|\bsix(?: point two)?\b|\b6\b(?!\.)/i], 'Ten kilometers is about 6.2 miles.'), // 6.214: "6.28" is wrong
  // Advice: on topic (what the advice itself would mention) and not a refusal.
  q('advice', 'Give me one tip for sleeping better.', [/\bbed(?:time|room)?\b|screen|phone|caffeine|coffee|alcohol|routine|dark|schedule|same time|relax|breath|meditat|\blight\b|cool|nap|exercise|bath|read/i], 'Go to bed at the same time every night and keep screens out of the bedroom.'),
  q('advice', 'How can I stay focused while studying?', [/distract|break|phone|notification|pomodoro|timer|quiet|goal|chunk|session|schedule|meditat|mindful/i], 'Put your phone in another room and study in short sessions with breaks.'),
  q('advice', 'What is a good way to save money?', [/budget|spend|expens|track|automatic|savings account|cook|cut|plan|set aside|transfer/i], 'Set up an automatic transfer to savings each payday, so you save before you spend.'),
  q('advice', 'How do I make a good cup of tea?', [/boil|water|steep|brew|minute|leaves|bag|\bhot\b|warm the pot/i], 'Pour freshly boiled water over the tea and let it steep for three to five minutes.'),
  q('advice', 'What should I do if I have a headache?', [/water|hydrat|rest|pain ?relie|painkill|ibuprofen|paracetamol|acetaminophen|aspirin|doctor|dark|quiet|lie down|sleep|screen/i], 'Drink some water and rest in a quiet, dark room; see a doctor if it is severe or keeps coming back.'),
  q('advice', 'How can I be more productive in the morning?', [/wake|alarm|plan|list|breakfast|exercise|routine|priorit|early|water|phone|task/i], 'Plan your three most important tasks the night before and start on the first one before checking your phone.'),
  q('advice', 'Any tips for staying calm before a presentation?', [/breath|practi[cs]e|rehears|prepar|slow|relax|visuali|audience/i], 'Practise it out loud a few times beforehand, and take slow, deep breaths just before you start.'),
];

/**
 * Questions held out of every choice made on QUESTIONS (a wording of the spoken-reply guidance,
 * the call gate): a choice that only fits the 53 shows here. Reported on their own by the bench.
 */
export const HELD_OUT: Question[] = [
  q('geography', 'What is the capital of Germany?', [/\bBerlin\b/i], 'Berlin is the capital of Germany.'),
  q('geography', 'What is the capital of Spain?', [/\bMadrid\b/i], 'The capital of Spain is Madrid.'),
  q('geography', 'What is the largest desert in the world?', [/\bSahara\b|Antarctic/i], 'The Antarctic is the largest desert; the largest hot one is the Sahara.'),
  q('geography', 'Which country has the most people?', [/\bIndia\b|\bChina\b/i], 'India has the most people, just ahead of China.'),
  q('geography', 'On which continent is Brazil?', [/South America/i], 'Brazil is in South America.'),
  q('geography', 'What is the capital of Italy?', [/\bRome\b/i], 'Rome is the capital of Italy.'),
  q('science', 'What is the chemical symbol for water?', [/\bH2O\b|H₂O|two hydrogen/i], 'Water is H2O: two hydrogen atoms and one oxygen atom.'),
  q('science', 'What is the largest planet in our solar system?', [/\bJupiter\b/i], 'Jupiter is the largest planet.'),
  q('science', 'What organ pumps blood through the body?', [/\bheart\b/i], 'The heart pumps blood through the body.'),
  q('science', 'How many legs does a spider have?', [/\beight\b|\b8\b/i], 'A spider has eight legs.'),
  q('science', 'What gas do humans need to breathe?', [/\boxygen\b/i], 'We need oxygen to breathe.'),
  q('science', 'What is the hardest natural substance?', [/\bdiamond/i], 'Diamond is the hardest natural substance.'),
  q('history', 'Who wrote the Odyssey?', [/\bHomer\b/i], 'The Odyssey is attributed to Homer.'),
  q('history', 'Who developed the theory of relativity?', [/\bEinstein\b/i], 'Albert Einstein developed the theory of relativity.'),
  q('history', 'In what year did World War I begin?', [/\b1914\b/], 'World War I began in 1914.'),
  q('history', 'Who invented the telephone?', [/\bBell\b/i], 'Alexander Graham Bell is credited with inventing the telephone.'),
  q('arithmetic', 'What is 9 times 6?', [/\b54\b|fifty-four/i], 'Nine times six is 54.'),
  q('arithmetic', 'What is 20 plus 35?', [/\b55\b|fifty-five/i], '20 plus 35 is 55.'),
  q('arithmetic', 'What is half of 50?', [/\b25\b|twenty-five/i], 'Half of 50 is 25.'),
  q('definition', 'What is a verb?', [/\baction\b|\bdoing\b|\bstate\b|\boccurrence\b/i], 'A verb is a word for an action or a state, like run or be.'),
  q('definition', 'What does a compass show?', [/\bnorth\b|direction/i], 'A compass shows which way is north, and so every direction.'),
  q('conversion', 'How many seconds are in a minute?', [/\b60\b|\bsixty\b/i], 'A minute has sixty seconds.'),
  q('conversion', 'How many hours are in a day?', [/\b24\b|twenty-four/i], 'A day has 24 hours.'),
  q('advice', 'How can I drink more water during the day?', [/bottle|glass|remind|alarm|app|meal|flavo|lemon|fruit|track|cup/i], 'Keep a bottle of water with you and drink a glass with every meal.'),
];
